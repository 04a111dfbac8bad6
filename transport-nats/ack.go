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
}

// acks batches a subscription's +ACKs. Every +ACK is its own message to the delivery's reply
// subject; published one at a time from many workers, each would be a write (and a read on the
// server) of its own. A batch goes out together once a batch's worth (the worker count) is
// waiting, or flushInterval after the first of it; each settlement is reported once its +ACK is
// written. Other acknowledgements (-NAK, +TERM, +WPI) go out at once.
type acks struct {
	c       *consumer
	mu      sync.Mutex
	pending []pendingAck
	timer   *time.Timer
	armed   bool
}

func (a *acks) add(d *Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	a.pending = append(a.pending, pendingAck{d: d, v: v, settled: settled})
	if len(a.pending) < a.c.batch {
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
	a.pending = make([]pendingAck, 0, a.c.batch)
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
	errs := make([]error, len(out))
	for i, p := range out {
		if err := p.d.msg.Ack(); err != nil {
			errs[i] = fmt.Errorf("natsjs: ack of stream %q sequence %d: %w", a.c.cfg.stream, p.d.seq, err)
		} else {
			a.c.lastDone.Store(p.d)
		}
		a.c.untrack(p.d)
	}
	for i, p := range out {
		p.settled(p.d, p.v, errs[i])
	}
}
