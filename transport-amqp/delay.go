package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Delay is where the copy of a RetryAfter waits on the server until it is due back on its
// queue, so that it survives a restart of the service. DLXTTL and DLXTTLNamed are this
// package's (a waiting queue with per-message TTL); the transport-amqp-dme module's amqpdme
// offers the rabbitmq_delayed_message_exchange plugin. Mount one with WithDelay, or with the
// option its package provides.
//
// The transport builds the copy (same body and properties, user headers, settle-retry-count
// raised, none of the broker's x-death headers), lets the Delay route it, publishes it on the
// delivery's channel and then acknowledges the original on that channel: a crash between the
// two duplicates the message, never loses it.
type Delay interface {
	// Ensure declares (declare) or passively checks (!declare) what the delayed copies of
	// queue need on the server. ch is a channel of its own, which a failed step may close. The
	// error names what is missing or refused; the subscription does not start with it. It runs
	// when the subscription opens and, when declaring, after every reconnection.
	Ensure(ch Channel, queue string, declare bool) error
	// Route prepares the copy of a message from queue that must come back no earlier than
	// delay: it sets the delay on msg (a per-message expiration, a header) and returns the
	// exchange and routing key to publish it with.
	Route(queue string, delay time.Duration, msg *amqp091.Publishing) (exchange, key string)
	// Where names where the copies of queue wait, for logs ("waiting queue \"refunds.retry\"").
	Where(queue string) string
}

// WithDelay makes RetryAfter copies of the queue wait in d on the server instead of in the
// process. Without it (the default) a copy waits in the process: at-most-once, lost if the
// service stops during the delay, which the subscription logs when it opens.
func WithDelay(d Delay) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if d == nil {
			return errors.New("amqp.WithDelay(nil): no delay")
		}
		if c.delay != nil {
			return fmt.Errorf("amqp.WithDelay: the queue already has a delay (%s); give it one", c.delay.Where(c.name))
		}
		c.delay = d
		return nil
	})
}

// msCeil is d in whole milliseconds, rounded up so that a copy never comes back early.
func msCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// delayer performs a RetryAfter below the cap: it parks the copy until it is due back on the
// queue and settles the original.
type delayer interface {
	park(ctx context.Context, c *consumer, s *session, d core.Delivery, v core.Verdict, settled core.Settled)
}

// newDelayer returns the subscription's delayer.
func newDelayer(c *consumer) delayer {
	if c.cfg.delay != nil {
		return serverDelay{c.cfg.delay}
	}
	return inProcessDelay{b: c.b, policy: c.cfg.policy}
}

// logDelay says in the log where the delayed copies of a subscription that started wait; a
// subscription that can lose them is logged at warning level.
func logDelay(c *consumer) {
	if c.cfg.delay != nil {
		c.log.Info("amqp: delayed retries wait on the server", "delay", c.cfg.delay.Where(c.cfg.name))
		return
	}
	c.log.Warn("amqp: delayed retries (RetryAfter) of this subscription wait in the process: at-most-once, a copy still waiting when the service stops is lost; mount the queue with amqp.DLXTTL() or amqpdme to keep them on the server")
}

// serverDelay publishes the copy to the Delay's exchange and routing key, then acknowledges
// the original, on the delivery's channel (under the Confirmed policy, once the copy is
// confirmed).
type serverDelay struct{ d Delay }

func (p serverDelay) park(ctx context.Context, c *consumer, s *session, d core.Delivery, v core.Verdict, settled core.Settled) {
	msg := copyOf(&base(d).raw, d.Attempt())
	exchange, key := p.d.Route(c.cfg.name, v.Delay, &msg)
	later, _ := p.d.(RoutesLater)
	c.publishThenAck(ctx, s, d, v, settled, exchange, key, msg, later == nil || !later.RoutesLater())
}

// RoutesLater is implemented by a Delay whose exchange routes a copy only once its delay is
// over, as the rabbitmq_delayed_message_exchange plugin does: RabbitMQ would return every
// mandatory publishing to it as unroutable, so its copies are published confirmed but not
// mandatory, and a copy whose route is gone by the time it is due is lost. Ensure binds the
// route when settle declares.
type RoutesLater interface {
	// RoutesLater reports whether copies are routed only when they are due.
	RoutesLater() bool
}

// inProcessDelay holds the copy in core.InProcessDelay and publishes it back to the queue when
// it is due, through the Broker's publishing channel: at-most-once, as that type documents
// (a stop during the delay loses the copy; every scheduled copy and every loss is logged). The
// original is acknowledged at once.
//
// A copy the broker does not take when it is due (the connection is down or cut, the queue
// refused or could not route it) stays in the process and is tried again after a wait that
// doubles from the Broker's CopyRetryBackoff minimum to its maximum, until the broker takes it
// or the Broker closes: its original is already acknowledged, so giving the copy up while the
// process runs would lose the message.
type inProcessDelay struct {
	b      *Broker
	policy PublishPolicy
}

func (p inProcessDelay) park(_ context.Context, c *consumer, s *session, d core.Delivery, v core.Verdict, settled core.Settled) {
	copy := copyOf(&base(d).raw, d.Attempt())
	p.b.delays.Schedule(c.cfg.name, d, v.Delay, p.release(c, d, copy, 0, 0))
	s.acks.ack(base(d).raw.DeliveryTag, d, v, settled)
}

// release returns the function that publishes copy back to its queue; failed is how many times
// it has failed before, waited the wait before this try (0 on the first).
func (p inProcessDelay) release(c *consumer, d core.Delivery, copy amqp091.Publishing, failed int, waited time.Duration) func() {
	return func() {
		queue := c.cfg.name
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.b.publish(ctx, "", queue, copy, p.policy == Confirmed)
		cancel()
		if err == nil {
			return
		}
		p.b.copies.count(err)
		c.report(core.Event{Kind: core.EventCopyRefused, MessageID: d.ID(), Attempt: d.Attempt(), Err: err})
		if errors.Is(err, core.ErrClosed) {
			c.log.Error("amqp: delayed copy lost: publishing it back failed and the broker is closed",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
			return
		}
		wait := clock.Backoff(waited, p.b.copyBackoff[0], p.b.copyBackoff[1])
		c.log.Error("amqp: delayed copy not published back; it stays in the process and is tried again",
			"message_id", d.ID(), "attempt", d.Attempt(), "failures", failed+1, "retry_in", wait, "error", err)
		p.b.delays.Schedule(queue, d, wait, p.release(c, d, copy, failed+1, wait))
	}
}
