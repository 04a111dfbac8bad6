package natsjs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/settlehq/settle/core"
)

// This file is what JetStream deliveries, consumers and the Conn tell telemetry and core: when
// a message was stored, whether its previous delivery may have died with a process, that
// RetryAfter delays are kept on the server, the connection's health and reconnections, and
// the trace context publishers write into headers.

// EnqueuedAt is when the stream stored the message (core.Enqueued); redeliveries keep it.
func (d *Delivery) EnqueuedAt() (time.Time, bool) { return d.stored, !d.stored.IsZero() }

// MessagingSystem is "nats" (core.MessagingSystem).
func (d *Delivery) MessagingSystem() string { return "nats" }

// Suspect reports a message delivered before whose previous delivery this subscription did not
// return itself (core.Suspect): its AckWait ran out, or the process that held it went away.
// JetStream raises NumDelivered on every redelivery, settle's own -NAK (a retry, a
// retry-after, an abandoned delivery) included; those are told apart by the stream sequences
// this subscription returned, so that only deliveries that may have killed a process run with
// no other handler beside them. A redelivery the set does not know (another replica's -NAK, a
// restart of this one) counts as suspect: a false alarm costs parallelism, never a message.
func (d *Delivery) Suspect() bool { return d.suspect }

// HoldsDelays is true (core.DelayHolder): a RetryAfter is a -NAK with a delay, held by the
// server.
func (c *consumer) HoldsDelays() bool { return true }

// maxReturned bounds the set of sequences a subscription remembers returning; past it the set
// starts over (deliveries it forgot count as suspect).
const maxReturned = 1 << 16

// returnedSet is the stream sequences a subscription returned with -NAK and has not seen
// delivered again.
type returnedSet struct {
	mu   sync.Mutex
	seqs map[uint64]struct{}
	n    atomic.Int64 // len(seqs): take takes no lock while the set is empty (the usual case)
}

// add remembers that seq was returned by this subscription.
func (r *returnedSet) add(seq uint64) {
	r.mu.Lock()
	if r.seqs == nil || len(r.seqs) >= maxReturned {
		r.seqs = make(map[uint64]struct{})
	}
	r.seqs[seq] = struct{}{}
	r.n.Store(int64(len(r.seqs)))
	r.mu.Unlock()
}

// take reports whether seq was returned by this subscription, and forgets it.
func (r *returnedSet) take(seq uint64) bool {
	if r.n.Load() == 0 {
		return false
	}
	r.mu.Lock()
	_, ok := r.seqs[seq]
	delete(r.seqs, seq)
	r.n.Store(int64(len(r.seqs)))
	r.mu.Unlock()
	return ok
}

// suspectOf is whether a delivery numbered n of stream sequence seq is suspect.
func (c *consumer) suspectOf(seq uint64, n uint64) bool {
	returned := c.returned.take(seq)
	return n > 1 && !returned
}

// report tells the App of an event of the consumer's subscription.
func (c *consumer) report(e core.Event) {
	if c.sub.Report != nil {
		c.sub.Report(e)
	}
}

// onReconnect registers f to be called when the connection is restored; the returned function
// unregisters it.
func (c *Conn) onReconnect(f func()) func() {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.reconnects == nil {
		c.reconnects = make(map[*func()]struct{})
	}
	k := &f
	c.reconnects[k] = struct{}{}
	return func() {
		c.evMu.Lock()
		delete(c.reconnects, k)
		c.evMu.Unlock()
	}
}

// onDisconnect registers f to be called when the connection drops; the returned function
// unregisters it.
func (c *Conn) onDisconnect(f func()) func() {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.drops == nil {
		c.drops = make(map[*func()]struct{})
	}
	k := &f
	c.drops[k] = struct{}{}
	return func() {
		c.evMu.Lock()
		delete(c.drops, k)
		c.evMu.Unlock()
	}
}

// disconnected tells every subscription of the connection, and every request waiting under
// untilDrop, that it dropped.
func (c *Conn) disconnected() {
	c.evMu.Lock()
	fs := make([]func(), 0, len(c.drops))
	for k := range c.drops {
		fs = append(fs, *k)
	}
	c.evMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// errDropped is the cause of a wait that untilDrop ended.
var errDropped = errors.New("the connection to NATS dropped before the server answered")

// untilDrop returns a context that ends with ctx, or with the cause errDropped when the
// connection drops, and its cancel function. A request sent before the drop waits for an answer
// that will not come: nats.go keeps waiting until its timeout (RequestTimeout, 5 s by default)
// across the reconnection, and a worker settling under it would wait with it. A request sent
// while the connection is down goes out on the reconnection and waits under the next drop only
// (one sent between the drop and nats.go's report of it ends with this drop too: its error says
// the message may have been stored, as it may be once the reconnection sends it).
func (c *Conn) untilDrop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	undo := c.onDisconnect(func() { cancel(errDropped) })
	return ctx, func() { undo(); cancel(nil) }
}

// reconnected tells every subscription of the connection that it was restored.
func (c *Conn) reconnected() {
	c.evMu.Lock()
	fs := make([]func(), 0, len(c.reconnects))
	for k := range c.reconnects {
		fs = append(fs, *k)
	}
	c.evMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// WithPropagator writes the trace context of Publish's context into the message's headers with
// p. Without it (and always for PublishRaw) the propagator the context carries is used: an
// App's handlers carry their App's (core.WithPropagator).
func WithPropagator(p core.Propagator) PublishOption {
	return func(pub *publishing) error {
		if p == nil {
			return errors.New("natsjs.WithPropagator(nil): no propagator")
		}
		pub.prop = p
		return nil
	}
}

// CheckHealth reports the connection (core.HealthChecker): pass when connected, fail while it
// reconnects (with the last error), has not connected yet, or is closed.
func (c *Conn) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Name: "nats " + redact(c.url), Status: core.HealthFail}
	c.mu.Lock()
	nc, closed := c.nc, c.closed
	c.mu.Unlock()
	switch {
	case closed:
		h.State = "closed"
		return h
	case nc == nil:
		h.State = "not connected"
		return h
	}
	switch nc.Status() {
	case nats.CONNECTED:
		h.Status, h.State = core.HealthPass, "connected"
	case nats.RECONNECTING, nats.DISCONNECTED:
		h.State = "reconnecting"
	case nats.DRAINING_SUBS, nats.DRAINING_PUBS:
		h.State = "draining"
	default:
		h.State = "closed"
	}
	if err := nc.LastError(); err != nil && h.Status != core.HealthPass {
		h.Output, h.ErrorAt = err.Error(), c.clock.Now()
	}
	return h
}

var (
	_ core.Enqueued        = (*Delivery)(nil)
	_ core.MessagingSystem = (*Delivery)(nil)
	_ core.Suspect         = (*Delivery)(nil)
	_ core.DelayHolder     = (*consumer)(nil)
	_ core.HealthChecker   = (*Conn)(nil)
)
