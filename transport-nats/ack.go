package natsjs

import (
	"fmt"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
)

// flushInterval bounds how long a settled +ACK waits for others to share its write. It is wall
// time, not the App's clock: a batching window like a network delay, which no outcome depends
// on, and which on a virtual clock must not wait for Advance.
const flushInterval = 2 * time.Millisecond

// pendingAck is an acknowledgement waiting for its batch's write.
type pendingAck struct {
	d       *Delivery
	v       core.Verdict
	settled core.Settled
	to      string // where its +ACK goes: the newest delivery's ack subject
}

// acks batches a subscription's +ACKs. Every +ACK is its own message to the delivery's reply
// subject; published one at a time from many workers, each would be a write (and a read on the
// server) of its own. A batch goes out together once a fetch's worth (FetchBatch, or the automatic
// fetch size) is waiting, or flushInterval after the first of it; each settlement is reported once its +ACK is
// written. Other acknowledgements (-NAK, +TERM, +WPI) go out at once.
type acks struct {
	c       *consumer
	mu      sync.Mutex
	pending []pendingAck
	spare   []pendingAck // a sent batch's array, for the next one (none allocated per batch)
	timer   *time.Timer
	armed   bool
}

func (a *acks) add(d *Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	a.pending = append(a.pending, pendingAck{d: d, v: v, settled: settled})
	if len(a.pending) < a.c.ackBatch() {
		if !a.armed {
			a.armed = true
			if a.timer == nil {
				a.timer = time.AfterFunc(flushInterval, a.flush)
			} else {
				a.timer.Reset(flushInterval)
			}
		}
		a.mu.Unlock()
		return
	}
	out := a.take()
	a.mu.Unlock()
	a.send(out)
}

// flush writes what is waiting: the timer, and Close.
func (a *acks) flush() {
	a.mu.Lock()
	out := a.take()
	a.mu.Unlock()
	a.send(out)
}

func (a *acks) take() []pendingAck {
	out := a.pending
	if a.spare != nil {
		a.pending, a.spare = a.spare, nil
	} else {
		a.pending = make([]pendingAck, 0, a.c.ackBatch())
	}
	if a.armed {
		a.armed = false
		a.timer.Stop()
	}
	return out
}

func (a *acks) send(out []pendingAck) {
	if len(out) == 0 {
		return
	}
	c := a.c
	// One lock for the targets of the batch, one to take them out of hand and one off the lease
	// list, rather than three per message; the +ACKs are published on the connection directly
	// (jetstream's Ack checks and marks its message under a lock of its own, twice).
	c.flyMu.Lock()
	for i := range out {
		out[i].to = c.targetLocked(out[i].d).Reply()
	}
	c.flyMu.Unlock()
	var errs []error
	for i, p := range out {
		if err := c.nc.Publish(p.to, ackFrame); err != nil {
			if errs == nil {
				errs = make([]error, len(out))
			}
			errs[i] = fmt.Errorf("natsjs: ack of stream %q sequence %d: %w", c.cfg.stream, p.d.seq, err)
		}
	}
	c.flyMu.Lock()
	for i, p := range out {
		if errs != nil && errs[i] != nil {
			c.landLocked(p.d, nil)
		} else {
			c.landLocked(p.d, ackFrame)
		}
	}
	c.flyMu.Unlock()
	c.leaseMu.Lock()
	for _, p := range out {
		c.untrackLocked(p.d)
	}
	c.leaseMu.Unlock()
	for i := len(out) - 1; i >= 0; i-- {
		if errs == nil || errs[i] == nil {
			c.lastDone.Store(out[i].d)
			break
		}
	}
	for i, p := range out {
		var err error
		if errs != nil {
			err = errs[i]
		}
		p.settled(p.d, p.v, err)
	}
	clear(out) // no delivery kept alive by the spare array
	a.mu.Lock()
	if a.spare == nil {
		a.spare = out[:0]
	}
	a.mu.Unlock()
}
