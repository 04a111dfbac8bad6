package lease

import (
	"sync"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// settler is the lease form's queue of finished deliveries and the goroutine that flushes it:
// Finish queues a delivery (enqueue), and the settler settles what is queued in grouped
// transactions (the batch completer) when a claim's worth has finished, when every claimed
// delivery has and no claim cycle is coming, or after the linger. A claim cycle takes what is
// queued too (take), to settle it in its own transaction (the claim completer).
type settler struct {
	src *Source

	mu     sync.Mutex
	queue  []item
	spare  []item    // an array popLocked handed out, given back by recycle
	queued time.Time // when the oldest queued item arrived
	// what the settler needs to know to leave a claim cycle's work to it (flushDueLocked)
	timing   bool // the linger timer is armed for what is queued
	idle     bool // Next waits for rows: no claim cycle is coming before a wake-up or the poll
	stopped  bool // the subscription stopped pulling: no claim cycle is coming at all
	claiming bool // a claimer runs ahead of the workers (ahead.go): its next cycle takes what is queued

	signal chan struct{}
}

// enqueue queues a finished delivery for the settler.
func (s *settler) enqueue(it item) {
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.queued = s.src.rt.Clock.Now()
	}
	s.queue = append(s.queue, it)
	n := len(s.queue)
	// Wake the settler only when it has something to decide: a first item when its linger
	// timer is not armed already (to time the linger), or a flush that is due now.
	wake := (n == 1 && !s.timing) || s.flushDueLocked(n)
	s.mu.Unlock()
	if wake {
		s.poke()
	}
}

// flushDueLocked reports whether the n queued items are to be flushed now rather than after
// the linger; s.mu is held. A claim's worth is. So is everything claimed, when no claim cycle
// is coming to take it (Next waits for rows, or the subscription stopped pulling); otherwise a
// claimant is about to cycle (every claimed delivery has finished, so the workers are free and
// one of them is in or on its way to Next), and its claim transaction settles them: a flush of
// the settler's own would spend a transaction (a commit, on SQLite a sync and the file's write
// lock) on what the claim does anyway, and race it.
func (s *settler) flushDueLocked(n int) bool {
	if n >= s.src.track.count() {
		return s.idle || s.stopped
	}
	limit := min(s.src.rt.Cfg.MaxFlush, int(s.src.cl.size.Load()))
	if s.claiming {
		// A claim ahead runs (ahead.go): the cycle after it takes a claim's worth as soon as
		// the workers have handed out the claim it follows.
		limit *= 2
	}
	return n >= limit
}

// setIdle records whether Next waits for rows; going idle wakes the settler when what is
// queued is due now that no claim cycle is coming.
func (s *settler) setIdle(idle bool) {
	s.mu.Lock()
	s.idle = idle
	s.unlockAndPokeIfDue()
}

// setStopped records that the subscription stopped pulling (no claim cycle is coming any
// more), and wakes the settler when what is queued is due now.
func (s *settler) setStopped() {
	s.mu.Lock()
	s.stopped = true
	s.unlockAndPokeIfDue()
}

// setClaiming records whether a claimer runs. Clearing it wakes nobody: Next is about to hand
// out what the last cycle took; what is queued meanwhile goes with a finish or the linger.
func (s *settler) setClaiming(on bool) {
	s.mu.Lock()
	s.claiming = on
	s.mu.Unlock()
}

// settledSome wakes the settler when, with fewer deliveries outstanding, what is queued is due
// now (it may now be all there is, which flushes at once when no claim cycle is coming).
func (s *settler) settledSome() {
	s.mu.Lock()
	s.unlockAndPokeIfDue()
}

// unlockAndPokeIfDue releases s.mu (held by its caller) and wakes the settler when what is
// queued is due now.
func (s *settler) unlockAndPokeIfDue() {
	due := len(s.queue) > 0 && s.flushDueLocked(len(s.queue))
	s.mu.Unlock()
	if due {
		s.poke()
	}
}

func (s *settler) poke() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// take removes up to a flush's worth of finished items from the queue.
func (s *settler) take() []item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.popLocked()
}

// popLocked removes up to a flush's worth of items from the front of the queue; s.mu is held.
// When that is the whole queue, the queue's own array is handed out and the queue goes on in
// the spare one (recycle gives an array back): a claim's worth of items is neither copied nor
// allocated per flush.
func (s *settler) popLocked() []item {
	n := min(len(s.queue), s.src.rt.Cfg.MaxFlush)
	if n == 0 {
		return nil
	}
	if n == len(s.queue) {
		items := s.queue
		s.queue, s.spare = s.spare, nil
		return items
	}
	items := make([]item, n)
	copy(items, s.queue)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.queued = s.src.rt.Clock.Now()
	return items
}

// recycle gives back the array of items popLocked handed out, once they are settled and
// reported, for the queue to use next.
func (s *settler) recycle(items []item) {
	if cap(items) == 0 {
		return
	}
	clear(items)
	s.mu.Lock()
	if s.spare == nil {
		s.spare = items[:0]
	}
	s.mu.Unlock()
}

// run flushes finished deliveries until stop; it owns every grouped statement outside a claim
// cycle.
func (s *settler) run(stop <-chan struct{}) {
	var linger clock.Timer
	var lingerC <-chan time.Time
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		select {
		case <-s.signal:
		case <-lingerC:
			// The linger of the oldest item queued when the timer was armed is over; a claim
			// cycle may have taken that one since, and the oldest now lingers on.
			lingerC = nil
		case <-stop:
			s.flushReady(true)
			return
		}
		wait := s.flushReady(false)
		switch {
		case wait > 0 && lingerC == nil:
			if linger == nil {
				linger = s.src.rt.Clock.NewTimer(wait)
			} else {
				linger.Reset(wait)
			}
			lingerC = linger.C()
		case wait == 0 && lingerC != nil:
			linger.Stop()
			lingerC = nil
		}
	}
}

// flushReady flushes what is queued when it should go now (force: all of it), and otherwise
// returns how long the oldest item may still wait (the settler times it: s.timing).
func (s *settler) flushReady(force bool) time.Duration {
	rt := s.src.rt
	for {
		s.mu.Lock()
		n := len(s.queue)
		if n == 0 {
			s.timing = false
			s.mu.Unlock()
			return 0
		}
		waited := rt.Clock.Now().Sub(s.queued)
		if !force && waited < rt.Cfg.Linger && !s.flushDueLocked(n) {
			s.timing = true
			s.mu.Unlock()
			return rt.Cfg.Linger - waited
		}
		items := s.popLocked()
		s.mu.Unlock()
		s.src.batch.flush(items, nil)
		s.recycle(items)
		force = false
	}
}
