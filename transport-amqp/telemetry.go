package amqp

import (
	"context"
	"errors"
	"time"

	"github.com/settlehq/settle/core"
)

// This file is what RabbitMQ deliveries and consumers tell telemetry and core: when a message
// was published (its timestamp property), whether its previous delivery may have died with a
// process (redelivered), whether RetryAfter delays are kept on the server, the Broker's health,
// and the trace context publishers write into headers.

// EnqueuedAt is the message's timestamp property (core.Enqueued), which Publish sets and copies
// keep; false for a message published without one. AMQP timestamps have whole seconds.
func (d *Delivery) EnqueuedAt() (time.Time, bool) { return d.raw.Timestamp, !d.raw.Timestamp.IsZero() }

// MessagingSystem is "rabbitmq" (core.MessagingSystem).
func (d *Delivery) MessagingSystem() string { return "rabbitmq" }

// Suspect reports a message whose previous delivery was returned unsettled by something other
// than this consumer (core.Suspect): a channel or connection that closed (a crash, a cut), or
// another consumer. Classic queues: redelivered; quorum queues: x-delivery-count above the
// returns this consumer made itself. A message this consumer requeued (a retry on a quorum queue
// or an uncapped classic one, an abandoned delivery, an original held back after a refused copy)
// is remembered by message id and is not suspect when it comes back; one without a message id
// is suspect whenever it is redelivered. Core runs a suspect delivery with no other handler of
// its subscription beside it, and the consumer's prefetch window falls back to one delivery
// (window.go), so that a message that crashes the process charges its crash to itself alone.
func (d *Delivery) Suspect() bool { return d.suspect }

// HoldsDelays reports whether the queue keeps RetryAfter copies on the server (a Delay:
// DLXTTL, amqpdme), so that core turns a Backoff policy into delays (core.DelayHolder);
// in-process delays are at-most-once and do not count.
func (c *consumer) HoldsDelays() bool { return c.cfg.delay != nil }

// WithPropagator writes the trace context of Publish's context into the message's headers with
// p. Without it Publish uses the propagator the context carries: an App's handlers carry their
// App's (core.WithPropagator).
func WithPropagator(p core.Propagator) PublishOption {
	return func(pub *publishing) error {
		if p == nil {
			return errors.New("amqp.WithPropagator(nil): no propagator")
		}
		pub.prop = p
		return nil
	}
}

// injectTrace adds ctx's trace context to the publishing's headers.
func (p *publishing) injectTrace(ctx context.Context) {
	p.headers = core.InjectHeaders(ctx, p.prop, p.headers)
}

// report tells the App of an event of the consumer's subscription (refused copies,
// reconnections), for metrics.
func (c *consumer) report(e core.Event) {
	if c.sub.Report != nil {
		c.sub.Report(e)
	}
}

// CheckHealth reports the Broker's connection (core.HealthChecker): pass when it is open; warn
// when it was lost and no dial has failed since (its users are reconnecting); fail when the
// last dial failed (with its error), before the first connection, and once closed. It does not
// dial itself: consumers reconnect on their own, publishers on their next publish.
func (b *Broker) CheckHealth(context.Context) core.ComponentHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := core.ComponentHealth{Name: "rabbitmq", Status: core.HealthFail}
	switch {
	case b.closed:
		h.State = "closed"
	case b.conn != nil && !b.conn.IsClosed():
		h.Status, h.State = core.HealthPass, "connected"
	case b.dialErr != nil:
		h.State = "reconnecting"
		h.Output, h.ErrorAt = b.dialErr.Error(), b.dialErrAt
	case b.conn != nil:
		h.Status, h.State = core.HealthWarn, "reconnecting"
	default:
		h.State = "not connected"
	}
	return h
}

var (
	_ core.HealthChecker   = (*Broker)(nil)
	_ core.Enqueued        = (*Delivery)(nil)
	_ core.MessagingSystem = (*Delivery)(nil)
	_ core.Suspect         = (*Delivery)(nil)
	_ core.DelayHolder     = (*consumer)(nil)
)
