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
//     original acknowledged, on the same channel), otherwise in the process (at-most-once,
//     logged) with the original acknowledged at once;
//   - dead letter (core resolved the cap, on classic and quorum queues alike): a copy carrying
//     the final count and why it died (core.DeadLetterInfo's headers) is published to the
//     destination (default exchange), then the original is acknowledged;
//   - abandon: basic.reject with requeue; it is never acknowledged.
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
			s.acks.reject(tag, true, d, v, settled)
			return
		}
		c.copyThenAck(ctx, s, d, v, settled, c.cfg.name)
	case core.ActRetryAfter:
		c.delay.park(ctx, c, s, d, v, settled)
	case core.ActDeadLetter:
		msg := copyOf(&del.raw, d.Attempt())
		for k, val := range core.NewDeadLetterInfo(d, v, c.cfg.name, c.clock.Now()).Headers() {
			msg.Headers[k] = val
		}
		c.publishThenAck(ctx, s, d, v, settled, "", v.Dest, msg)
	default: // core.ActAbandon
		s.acks.reject(tag, true, d, v, settled)
	}
}

// copyThenAck publishes a copy of the delivery, carrying its attempt as the count, to key on the
// default exchange, then acknowledges the original; publish first, on the same channel. Under
// the Confirmed policy the acknowledgement waits for the broker's confirmation, and a copy that
// is not confirmed leaves the original to come back (rejected with requeue).
func (c *consumer) copyThenAck(ctx context.Context, s *session, d core.Delivery, v core.Verdict, settled core.Settled, key string) {
	c.publishThenAck(ctx, s, d, v, settled, "", key, copyOf(&base(d).raw, d.Attempt()))
}

// publishThenAck publishes msg to exchange with key, then acknowledges the original, on the
// delivery's channel, as copyThenAck describes.
func (c *consumer) publishThenAck(ctx context.Context, s *session, d core.Delivery, v core.Verdict, settled core.Settled, exchange, key string, msg amqp091.Publishing) {
	tag := base(d).raw.DeliveryTag
	if s.acks.isDead() {
		settled(d, v, ErrChannelGone)
		return
	}
	if !s.confirm {
		if err := s.ch.PublishWithContext(ctx, exchange, key, false, false, msg); err != nil {
			s.acks.reject(tag, true, d, v, func(d core.Delivery, v core.Verdict, _ error) { settled(d, v, err) })
			return
		}
		s.acks.ack(tag, d, v, settled)
		return
	}
	dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	if err == nil {
		err = waitConfirm(ctx, dc)
	}
	if err != nil {
		c.log.Warn("amqp: copy not confirmed; the original is returned, not acknowledged",
			"message_id", d.ID(), "attempt", d.Attempt(), "exchange", exchange, "to", key, "error", err)
		s.acks.reject(tag, true, d, v, func(d core.Delivery, v core.Verdict, _ error) { settled(d, v, err) })
		return
	}
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
