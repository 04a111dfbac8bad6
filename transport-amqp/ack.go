package amqp

import (
	"sync"
	"sync/atomic"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Tag states in an acker's window.
const (
	tagOpen   uint8 = iota // handed out, not settled
	tagAcking              // settled as an acknowledgement, not yet sent
	tagDone                // acknowledged or rejected on the wire
)

// pendingAck is a settlement waiting for the acknowledgement that will carry it.
type pendingAck struct {
	d       core.Delivery
	v       core.Verdict
	settled core.Settled
}

// acker coalesces a session's acknowledgements. Deliveries are handed out in delivery-tag
// order; a settled acknowledgement is marked in the window of tags not yet finalized. A flush
// sends one basic.ack with multiple=true for the contiguous run of finalized tags from the
// lowest (rejected tags in the run are no longer outstanding, so the range never covers a tag
// that must not be acknowledged), and acknowledges tags above a gap one by one only when the
// batch is full or the subscription is idle, so out-of-order workers still ack in ranges.
// Rejections are sent at once, one per message. Abandoned deliveries are rejected with requeue,
// so no range ever acknowledges them.
//
// A flush happens when the batch is full, when the consumer is about to wait for the next
// delivery, on every acknowledgement while it waits (idle), after flushInterval on the clock
// (busy workers), and before the consumer closes.
type acker struct {
	s       *session
	mu      sync.Mutex
	base    uint64  // lowest tag not yet finalized
	window  []uint8 // state of tags base, base+1, …, up to the last handed out
	pending []pendingAck
	spare   []pendingAck
	dead    bool
	idle    atomic.Bool // the consumer waits for its next delivery: send at once
	timer   clock.Timer
	armed   bool
}

func (a *acker) init(s *session) {
	a.s = s
	a.base = 1
}

// handOut enters tag into the window as handed out.
func (a *acker) handOut(tag uint64) {
	a.mu.Lock()
	for uint64(len(a.window)) <= tag-a.base {
		a.window = append(a.window, tagOpen)
	}
	a.mu.Unlock()
}

// ack batches the acknowledgement of tag; settled is called once it is sent (or has failed).
func (a *acker) ack(tag uint64, d core.Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		settled(d, v, ErrChannelGone)
		return
	}
	a.window[tag-a.base] = tagAcking
	a.pending = append(a.pending, pendingAck{d, v, settled})
	if len(a.pending) < a.s.c.batch && !a.idle.Load() {
		if !a.armed {
			a.armed = true
			if a.timer == nil {
				a.timer = a.s.c.clock.AfterFunc(flushInterval, func() { a.flush(true) })
			} else {
				a.timer.Reset(flushInterval)
			}
		}
		a.mu.Unlock()
		return
	}
	done, err := a.flushLocked(false)
	a.mu.Unlock()
	a.report(done, err)
}

// reject sends basic.reject for tag at once and reports the settlement.
func (a *acker) reject(tag uint64, requeue bool, d core.Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		settled(d, v, ErrChannelGone)
		return
	}
	err := a.s.ch.Reject(tag, requeue)
	a.window[tag-a.base] = tagDone
	a.mu.Unlock()
	settled(d, v, err)
}

// flush sends what is batched; all also acknowledges tags above a gap.
func (a *acker) flush(all bool) {
	a.mu.Lock()
	if a.dead || len(a.pending) == 0 {
		a.mu.Unlock()
		return
	}
	done, err := a.flushLocked(all)
	a.mu.Unlock()
	a.report(done, err)
}

func (a *acker) flushLocked(all bool) ([]pendingAck, error) {
	i, last := 0, -1
	for i < len(a.window) && a.window[i] != tagOpen {
		if a.window[i] == tagAcking {
			last = i
		}
		i++
	}
	var err error
	covered := 0
	if last >= 0 {
		err = a.s.ch.Ack(a.base+uint64(last), true)
		for j := 0; j <= last; j++ {
			if a.window[j] == tagAcking {
				a.window[j] = tagDone
				covered++
			}
		}
	}
	rest := len(a.pending) - covered
	if rest > 0 && (all || rest >= a.s.c.batch) {
		for j := i; j < len(a.window) && err == nil; j++ {
			if a.window[j] == tagAcking {
				err = a.s.ch.Ack(a.base+uint64(j), false)
				a.window[j] = tagDone
			}
		}
		rest = 0
	}
	a.window = a.window[i:]
	a.base += uint64(i)
	if err != nil {
		a.dead = true // a failed frame means the channel is closed
	}
	var done []pendingAck
	if rest == 0 || err != nil {
		done = a.pending
		a.pending, a.spare = a.spare[:0], nil
		if a.armed {
			a.armed = false
			a.timer.Stop()
		}
		return done, err
	}
	// Some acknowledgements wait above a gap: report the ones sent, keep the others.
	done = make([]pendingAck, 0, covered)
	keep := a.pending[:0]
	for _, p := range a.pending {
		if a.sent(p.d) {
			done = append(done, p)
		} else {
			keep = append(keep, p)
		}
	}
	a.pending = keep
	return done, err
}

// sent reports whether d's tag has been acknowledged on the wire (it is below the window, or
// marked done in it).
func (a *acker) sent(d core.Delivery) bool {
	tag := base(d).raw.DeliveryTag
	return tag < a.base || a.window[tag-a.base] == tagDone
}

func (a *acker) report(done []pendingAck, err error) {
	for _, p := range done {
		p.settled(p.d, p.v, err)
	}
	if cap(done) > 0 {
		a.mu.Lock()
		if a.spare == nil {
			clear(done)
			a.spare = done[:0]
		}
		a.mu.Unlock()
	}
}

// die marks the session's channel closed: batched acknowledgements fail with ErrChannelGone
// (their messages come back by themselves) and nothing more is sent on it.
func (a *acker) die() {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		return
	}
	a.dead = true
	done := a.pending
	a.pending = nil
	if a.armed {
		a.armed = false
		a.timer.Stop()
	}
	a.mu.Unlock()
	a.report(done, ErrChannelGone)
}

func (a *acker) isDead() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}
