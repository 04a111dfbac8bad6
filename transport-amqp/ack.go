package amqp

import (
	"errors"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"sync"

	"github.com/settlehq/settle/core"
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
	err     error // set when the acknowledgement has gone out or failed
}

// acker coalesces a session's acknowledgements. Deliveries are handed out in delivery-tag
// order; a settled acknowledgement is marked in the window of tags not yet finalized. A flush
// sends one basic.ack with multiple=true for the contiguous run of finalized tags from the
// lowest (rejected tags in the run are no longer outstanding, so the range never covers a tag
// that must not be acknowledged), and acknowledges tags above a gap one by one only when half
// the prefetch waits there or the gap outlives a flush interval, so out-of-order workers still
// ack in ranges.
// Rejections are sent at once, one per message. Abandoned deliveries are rejected with requeue,
// so no range ever acknowledges them.
//
// A flush happens when the batch is full (the prefetch, at most 128: as few frames as the
// window allows, which is what RabbitMQ's throughput depends on, classic or quorum),
// flushInterval after the first acknowledgement of a batch (tags above a gap wait one more
// interval for it to close, unless half a batch waits there), and before the consumer closes. The interval is
// wall time, not the App's clock: it is a batching window like a network delay, which no
// outcome depends on, and on a virtual clock it must not wait for Advance.
type acker struct {
	s       *session
	mu      sync.Mutex
	base    uint64  // lowest tag not yet finalized
	window  []uint8 // state of tags base, base+1, …, up to the highest settled (mark)
	pending []pendingAck
	// spare is a reported batch's slice, cleared, for the next flush to report into: a flush
	// every few milliseconds would otherwise allocate a window's worth of pendingAcks each time.
	spare  []pendingAck
	dead   bool // set together with reporting every batched acknowledgement
	timer  *time.Timer
	armed  bool
	waited bool // the batch outlived one interval waiting above a gap
}

func (a *acker) init(s *session) {
	a.s = s
	a.base = 1
}

// mark sets the state of tag, a delivery of this session being settled. The window reaches up
// to the highest tag settled: the tags between it and the last one entered are open (handed
// out or still on their way, not settled), so they enter it as open. Entering tags as they are
// settled, not as they arrive, spares each delivery a turn of the lock on its way to the
// handler; the window holds the same states up to the highest settled tag, and no flush looks
// past it.
func (a *acker) mark(tag uint64, state uint8) {
	for uint64(len(a.window)) <= tag-a.base {
		a.window = append(a.window, tagOpen)
	}
	a.window[tag-a.base] = state
}

// ack batches the acknowledgement of tag; settled is called once it is sent (or has failed).
func (a *acker) ack(tag uint64, d core.Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		a.s.c.lostWithChannel(d)
		settled(d, v, ErrChannelGone)
		return
	}
	a.mark(tag, tagAcking)
	a.pending = append(a.pending, pendingAck{d: d, v: v, settled: settled})
	if len(a.pending) < a.s.flushAt() {
		if !a.armed {
			a.armed = true
			if a.timer == nil {
				a.timer = time.AfterFunc(flushInterval, a.tick)
			} else {
				a.timer.Reset(flushInterval)
			}
		}
		a.mu.Unlock()
		return
	}
	done, _ := a.flushLocked(false)
	a.mu.Unlock()
	a.report(done)
}

// reject sends basic.reject for tag at once and reports the settlement.
func (a *acker) reject(tag uint64, requeue bool, d core.Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		a.s.c.lostWithChannel(d)
		settled(d, v, ErrChannelGone)
		return
	}
	raw := &base(d).raw
	if requeue {
		// Its redelivery is this consumer's doing, not a crash's (Suspect). Recorded before
		// the frame: the redelivery can arrive before Reject returns.
		next := classicRequeued
		if a.s.c.cfg.quorum {
			dc, _ := deliveryCount(raw.Headers)
			next = dc + 1
		}
		a.s.c.returned.record(raw.MessageId, next)
	}
	err := gone(a.s.ch.Reject(tag, requeue))
	switch {
	case err != nil && !a.s.c.cfg.quorum:
		a.s.c.lostWithChannel(d)
	case err != nil && requeue:
		a.s.c.returned.take(raw.MessageId) // it comes back with its closed channel: a crash's return
	}
	a.mark(tag, tagDone)
	var lost []pendingAck
	if err != nil {
		// The channel is closed: what is batched on it will not go out either.
		a.dead = true
		lost = failAll(a.pending, ErrChannelGone)
		a.pending = nil
	}
	a.mu.Unlock()
	settled(d, v, err)
	a.report(lost)
}

// tick is the flush timer: it sends the contiguous run; acknowledgements waiting above a gap
// (a handler still running on a lower tag) get one more interval for the gap to close, then go
// out one by one so that a slow handler never holds the others' acknowledgements for long.
func (a *acker) tick() {
	a.mu.Lock()
	a.armed = false
	if a.dead || len(a.pending) == 0 {
		a.waited = false
		a.mu.Unlock()
		return
	}
	done, _ := a.flushLocked(a.waited)
	a.waited = len(a.pending) > 0
	if a.waited && !a.armed {
		a.armed = true
		a.timer.Reset(flushInterval)
	}
	a.mu.Unlock()
	a.report(done)
}

// flush sends what is batched; all also acknowledges tags above a gap.
func (a *acker) flush(all bool) {
	a.mu.Lock()
	if a.dead || len(a.pending) == 0 {
		a.mu.Unlock()
		return
	}
	done, _ := a.flushLocked(all)
	a.mu.Unlock()
	a.report(done)
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
	if last >= 0 {
		if err = gone(a.s.ch.Ack(a.base+uint64(last), true)); err == nil {
			for j := 0; j <= last; j++ {
				a.window[j] = tagDone
			}
		}
	}
	if err == nil {
		above := 0
		for j := i; j < len(a.window); j++ {
			if a.window[j] == tagAcking {
				above++
			}
		}
		if above > 0 && (all || above >= (a.s.c.batch+1)/2) {
			for j := i; j < len(a.window) && err == nil; j++ {
				if a.window[j] == tagAcking {
					if err = gone(a.s.ch.Ack(a.base+uint64(j), false)); err == nil {
						a.window[j] = tagDone
					}
				}
			}
		}
	}
	// Advance the window over the finalized prefix.
	n := 0
	for n < len(a.window) && a.window[n] == tagDone {
		n++
	}
	a.window = a.window[n:]
	a.base += uint64(n)
	if err != nil {
		a.dead = true // a failed frame means the channel is closed
	}
	// Report what went out; with the channel gone, also what did not (it comes back by
	// itself); keep the rest batched.
	done := a.spare[:0] // taken: report gives it back once its settlements are told
	a.spare = nil
	keep := a.pending[:0]
	for _, p := range a.pending {
		switch {
		case a.sent(p.d):
			p.err = nil
			done = append(done, p)
		case err != nil:
			p.err = err
			done = append(done, p)
		default:
			keep = append(keep, p)
		}
	}
	clear(a.pending[len(keep):])
	a.pending = keep
	if len(done) == 0 {
		a.spare, done = done, nil
	}
	if len(keep) == 0 {
		a.waited = false
		if a.armed {
			a.armed = false
			a.timer.Stop()
		}
	}
	return done, err
}

// sent reports whether d's tag has been acknowledged on the wire (it is below the window, or
// marked done in it).
func (a *acker) sent(d core.Delivery) bool {
	tag := base(d).raw.DeliveryTag
	return tag < a.base || a.window[tag-a.base] == tagDone
}

// report tells each settlement of done, then keeps done's array as the acker's spare: done
// is always a slice no one else holds (a flush's, or a pending batch the acker let go of).
func (a *acker) report(done []pendingAck) {
	if cap(done) == 0 {
		return
	}
	for _, p := range done {
		if p.err != nil {
			a.s.c.lostWithChannel(p.d)
		}
		p.settled(p.d, p.v, p.err)
	}
	clear(done) // no delivery stays reachable from the spare
	a.mu.Lock()
	if a.spare == nil {
		a.spare = done[:0]
	}
	a.mu.Unlock()
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
	done := failAll(a.pending, ErrChannelGone)
	a.pending = nil
	if a.armed {
		a.armed = false
		a.timer.Stop()
	}
	a.mu.Unlock()
	a.report(done)
}

func (a *acker) isDead() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

// gone translates a frame refused because the channel closed into ErrChannelGone.
func gone(err error) error {
	if errors.Is(err, amqp091.ErrClosed) {
		return fmt.Errorf("%w: %v", ErrChannelGone, err)
	}
	return err
}

func failAll(p []pendingAck, err error) []pendingAck {
	for i := range p {
		p[i].err = err
	}
	return p
}
