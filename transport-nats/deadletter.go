package natsjs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// deadLetter publishes a copy of the delivery to v.Dest with the dead-letter headers and the
// original's headers, waits for JetStream's publish acknowledgement, then terminates the
// original. The copy keeps the original's message id (its Nats-Msg-Id, or "<stream>:<sequence>"
// when it has none) as its Nats-Msg-Id: the dead letter's deliveries report the same ID, and a
// copy published again (the original came back before its +TERM reached the server) is dropped
// by the destination stream's duplicate window.
//
// The wait for the publish acknowledgement ends when the connection drops (a server that
// crashed, or a cut): the answer will not come, and the worker would otherwise wait out
// RequestTimeout, holding every other handler back when the message is a suspect one (core runs
// those alone). The copy is then counted as not stored.
//
// A copy that is not stored leaves the original unsettled: it stays leased (+WPI) for a backoff
// on the clock (doubling per failure in a row, bounded by DeadLetterBackoff), then is returned
// with -NAK and delivered again; being past the cap, it goes straight to the dead letter again.
// The first failure of a run is logged at error level, the others at most once a backoff.
func (c *consumer) deadLetter(ctx context.Context, d *Delivery, v core.Verdict, settled core.Settled) {
	msg := nats.NewMsg(v.Dest)
	msg.Data = d.msg.Data()
	h := make(map[string]string, 8)
	for k, vs := range d.msg.Headers() {
		if len(vs) > 0 && !serverHeader(k) {
			h[k] = vs[0]
		}
	}
	core.NewDeadLetterInfo(d, v, c.queue, c.clock.Now()).AddTo(h)
	for k, s := range h {
		msg.Header.Set(k, s)
	}
	msg.Header.Set(jetstream.MsgIDHeader, d.ID())
	_, err := c.c.publishMsg(ctx, c.js, msg)
	if err != nil {
		wait := c.dl.fail(c.clock.Now())
		if c.dl.shouldLog(c.clock.Now()) {
			c.log.Error("nats: dead-letter copy not stored; the message is held, then delivered again",
				"queue", c.queue, "message_id", d.ID(), "attempt", d.Attempt(), "dead_letter_to", v.Dest,
				"backoff", wait, "failures_in_a_row", c.dl.failures(), "error", err)
		}
		c.report(core.Event{Kind: core.EventCopyRefused, MessageID: d.ID(), Attempt: d.Attempt(), Err: err})
		c.hold(d, wait)
		settled(d, v, fmt.Errorf("natsjs: dead letter to %q of stream %q sequence %d: %w: %w", v.Dest, c.cfg.stream, d.seq, ErrDeadLetterNotStored, err))
		return
	}
	c.dl.succeed()
	c.term(ctx, d, v, settled)
}

// hold keeps d leased for wait on the clock, then returns it with -NAK.
func (c *consumer) hold(d *Delivery, wait time.Duration) {
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	if c.closed {
		c.untrackLocked(d)
		_ = c.nak(d, 0)
		return
	}
	c.held[d] = c.clock.AfterFunc(wait, func() {
		c.leaseMu.Lock()
		defer c.leaseMu.Unlock()
		if _, ok := c.held[d]; !ok { // Close returned it
			return
		}
		delete(c.held, d)
		c.untrackLocked(d)
		c.returned.add(d.seq)
		if err := c.nak(d, 0); err != nil {
			c.log.Warn("nats: returning a held message failed; it comes back when its AckWait runs out",
				"queue", c.queue, "message_id", d.ID(), "attempt", d.Attempt(), "error", err)
		}
	})
}

// serverHeader reports the headers JetStream sets or interprets, which a copy must not carry
// (an original's Nats-Expected-* would make the copy's publish fail).
func serverHeader(k string) bool {
	return len(k) >= 5 && (k[:5] == "Nats-" || k[:5] == "nats-")
}

// dlBackoff is the doubling wait after dead-letter copies that failed in a row, shared by a
// subscription's deliveries, and the rate limit of its error log.
type dlBackoff struct {
	min, max time.Duration

	mu      sync.Mutex
	wait    time.Duration
	n       int
	nextLog time.Time
}

func (b *dlBackoff) fail(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	b.wait = clock.Backoff(b.wait, b.min, b.max)
	return b.wait
}

func (b *dlBackoff) failures() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// shouldLog reports whether this failure is logged: the first of a run, then at most once per
// current backoff (and at least once a maximum backoff).
func (b *dlBackoff) shouldLog(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 1 || !now.Before(b.nextLog) {
		b.nextLog = now.Add(b.max)
		return true
	}
	return false
}

func (b *dlBackoff) succeed() {
	b.mu.Lock()
	b.wait, b.n = 0, 0
	b.mu.Unlock()
}
