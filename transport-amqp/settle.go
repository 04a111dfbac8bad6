package amqp

import (
	"context"
	"strconv"
	"strings"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// base returns the classic part of a delivery of this package.
func base(d core.Delivery) *Delivery {
	switch x := d.(type) {
	case *Delivery:
		return x
	case *QuorumDelivery:
		return &x.Delivery
	}
	panic("amqp: Finish given a delivery of another backend: " + d.ID())
}

// Finish performs v on the delivery's own channel:
//
//   - ack: basic.ack, coalesced with its neighbours into one multiple acknowledgement;
//   - drop: basic.reject without requeue (the queue's own dead-letter route takes it); on a
//     quorum queue whose route is the cap's destination, basic.ack instead, because settle's
//     dead letter keeps only messages that spent their attempts;
//   - retry: on a classic queue with a cap, a copy with settle-retry-count raised is published
//     back to the queue, then the original is acknowledged; otherwise basic.reject with requeue
//     (a quorum queue counts it);
//   - retry after d: a copy with the count raised waits d, then comes back to the queue: on the
//     server when the queue has a Delay (DLXTTL, amqpdme; the copy is published, then the
//     original acknowledged), otherwise in the process (at-most-once, logged) with the original
//     acknowledged at once;
//   - dead letter (core resolved the cap, on classic and quorum queues alike): a copy carrying
//     the final count and why it died (core.DeadLetterInfo's headers) is published to the
//     destination (default exchange), then the original is acknowledged;
//   - abandon: the consumer is cancelled (once), then basic.reject with requeue; it is never
//     acknowledged.
//
// Copies follow the queue's publish policy (PublishWith): under Confirmed, the default, a copy
// is published mandatory and the original acknowledged only once the broker confirmed it; a
// copy returned or refused leaves the original held back and then returned (see hold).
func (c *consumer) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	del := base(d)
	s := del.s
	tag := del.raw.DeliveryTag
	switch v.Action {
	case core.ActAck:
		s.acks.ack(tag, d, v, settled)
	case core.ActDrop:
		if c.dropByAck {
			s.acks.ack(tag, d, v, settled)
			return
		}
		s.acks.reject(tag, false, d, v, settled)
	case core.ActRetry:
		if c.cfg.quorum || c.cap == 0 {
			c.returnsToDiscard(d, v)
			s.acks.reject(tag, true, d, v, settled)
			return
		}
		c.publishThenAck(ctx, s, d, v, settled, "", c.cfg.name, copyOf(&del.raw, d.Attempt()), true)
	case core.ActRetryAfter:
		c.delay.park(ctx, c, s, d, v, settled)
	case core.ActDeadLetter:
		msg := copyOf(&del.raw, d.Attempt())
		for k, val := range core.NewDeadLetterInfo(d, v, c.cfg.name, c.clock.Now()).Headers() {
			msg.Headers[k] = val
		}
		c.publishThenAck(ctx, s, d, v, settled, "", v.Dest, msg, true)
	default: // core.ActAbandon
		c.returnsToDiscard(d, v)
		s.stopConsuming()
		s.acks.reject(tag, true, d, v, settled)
	}
}

// publishThenAck publishes msg (mandatory when mandatory: a destination that routes later,
// like the delayed-message exchange, cannot be checked at publishing time), then acknowledges
// the original.
//
// Under Confirmed the copy goes through the Broker's confirm-mode channels and the original is
// acknowledged once the broker confirmed it; a copy that is returned, refused or not confirmed
// leaves the original held back for a doubling wait and then returned with requeue (hold).
// Under FireAndForget the copy goes out on the delivery's own channel and the original is
// acknowledged right after it on the same channel: a crash between the two duplicates, but a
// copy the broker returns or refuses is lost (counted and logged, fireandforget.go).
func (c *consumer) publishThenAck(ctx context.Context, s *session, d core.Delivery, v core.Verdict, settled core.Settled, exchange, key string, msg amqp091.Publishing, mandatory bool) {
	tag := base(d).raw.DeliveryTag
	if s.acks.isDead() {
		c.lostWithChannel(d)
		settled(d, v, ErrChannelGone)
		return
	}
	if c.cfg.policy == FireAndForget {
		if err := s.publishCopy(ctx, exchange, key, mandatory, msg, d.ID(), d.Attempt()); err != nil {
			err = gone(err)
			c.b.copies.failed.Add(1)
			s.acks.reject(tag, true, d, v, func(d core.Delivery, v core.Verdict, _ error) { settled(d, v, err) })
			return
		}
		c.b.copies.published.Add(1)
		s.acks.ack(tag, d, v, settled)
		return
	}
	dest := exchange + "/" + key
	if err := c.b.publishConfirmed(ctx, exchange, key, mandatory, msg); err != nil {
		c.hold(s, d, v, settled, dest, err)
		return
	}
	c.b.copies.published.Add(1)
	c.held.ok(dest)
	s.acks.ack(tag, d, v, settled)
}

// copyOf builds the copy of a delivery that settle publishes: the same body, content type and
// encoding, message and correlation ids, persistence and user headers, with settle-retry-count
// set to count. The broker's own headers (x-death, x-first-death-*, x-last-death-*,
// x-delivery-count, x-delay) describe the history of the original message and are not carried: a copy is
// a new message, and RabbitMQ 3.13+ ignores client-set x-death anyway.
func copyOf(m *amqp091.Delivery, count int) amqp091.Publishing {
	h := make(amqp091.Table, len(m.Headers)+1)
	for k, v := range m.Headers {
		if brokerHeader(k) {
			continue
		}
		h[k] = v
	}
	h[RetryCountHeader] = strconv.Itoa(count)
	mode := m.DeliveryMode
	if mode == 0 {
		mode = amqp091.Persistent
	}
	return amqp091.Publishing{
		Headers:         h,
		ContentType:     m.ContentType,
		ContentEncoding: m.ContentEncoding,
		DeliveryMode:    mode,
		Priority:        m.Priority,
		CorrelationId:   m.CorrelationId,
		ReplyTo:         m.ReplyTo,
		MessageId:       m.MessageId,
		Timestamp:       m.Timestamp,
		Type:            m.Type,
		UserId:          m.UserId,
		AppId:           m.AppId,
		Body:            m.Body,
	}
}

func brokerHeader(k string) bool {
	// x-delay is the delayed-message exchange's account of an earlier publishing (negated on
	// release), not a property of the copy.
	return k == "x-death" || k == "x-delivery-count" || k == "x-delay" ||
		strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-")
}
