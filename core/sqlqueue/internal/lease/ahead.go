package lease

import (
	"context"
	"sync"
)

// This file is the lease form's claiming ahead. A claim cycle (settle what has finished, claim
// the next batch, commit) waits on the database: on SQLite for the file's write and sync, on a
// server for its round trips and commit. Run when the workers have handed out the last row of a
// claim, it leaves them idle for that long, and the database idle while they handle the claim.
// While the automatic claim size (no BatchSize) sees claims come back full and the workers get
// through each in under batchCycle, Next instead starts a claimer goroutine as it hands out a
// claim's first row, and the database works on the next claim while the workers handle this
// one. Each cycle settles what finished before it began (the claim before).
//
// The claimer goes on from one cycle to the next without a pause while the workers keep up
// (Next is already waiting for the claim it just made): a pause would cost a goroutine's wake-up
// on another core, which on a virtual machine is a sizeable part of a small claim's time.
// Otherwise it waits for Next to take the claim it made before it makes another. A process thus
// holds at most the claim its workers handle and one claimed ahead. A claim ahead is tracked as
// soon as it is taken (its leases are extended, a rescue waits for it), and handed back at once,
// uncounted, when the subscription stops pulling, like the unhanded rows of the current claim.
// The claimer stops when a claim comes back short or empty, the workers slow down, a cycle
// fails, or a rescue of lapsed rows is due; Next then claims in the foreground until the claims
// are full and fast again.

// ahead is Next's side of the claimer: whether one runs, and the channel of its outcomes.
type ahead struct {
	running    bool             // a claimer runs, or its last cycle's outcome is not taken yet
	results    chan aheadResult // each cycle's outcome, to Next
	wg         sync.WaitGroup   // the claimer, while it runs
	unreported cycleDone        // reported as Next returns (after it started the claimer)
}

// aheadResult is how one of the claimer's cycles ended; its batch and the settlements it
// committed, if any, are in the handout's pending slot.
type aheadResult struct {
	woken <-chan struct{} // the wake-up to wait on if the claim found nothing
	err   error
	last  bool // the claimer stopped after this cycle
}

// startAheadLocked reports whether Next, handing out the first row of a claim, starts the
// claimer; l.hand.mu is held. When it does, the claimer counts as running from here on (Close
// waits for it).
func (l *Source) startAheadLocked() bool {
	if l.ahead.running || l.hand.stopping || !l.cl.mayAhead || l.rescue.rescuing {
		return false
	}
	l.ahead.wg.Add(1)
	return true
}

// claimAhead starts the claimer; Next takes each cycle's outcome with aheadDone.
func (l *Source) claimAhead(ctx context.Context) {
	l.ahead.running = true
	l.settle.setClaiming(true)
	go l.claimer(ctx)
}

// claimer runs claim cycles ahead of the workers (see the top of this file).
func (l *Source) claimer(ctx context.Context) {
	defer l.ahead.wg.Done()
	for {
		woken := l.rt.Wake.Wait()
		b, done, err := l.cl.cycle(ctx)
		more := err == nil && b != nil && l.cl.mayAhead && !l.rescue.rescuing
		h := &l.hand
		h.mu.Lock()
		l.awaitTakenLocked(ctx) // one claim ahead at most
		if h.stopping {
			h.pending, h.pendingDone = b, done
			h.mu.Unlock()
			_ = l.giveBack() // it logs a failure; the rows come back when their leases run out
			select {
			case l.ahead.results <- aheadResult{woken: woken, err: err, last: true}:
			default:
			}
			return
		}
		h.pending, h.pendingDone, h.hasPending = b, done, true
		// Next already waits for this claim, so it takes it at once: go on to the next one.
		waiting := h.waiting
		h.mu.Unlock()
		if b != nil {
			l.rt.Log.Debug("sqlqueue: claimed ahead of the workers", "queue", l.rt.Q.Name, "rows", len(b.ds))
		}
		l.ahead.results <- aheadResult{woken: woken, err: err, last: !more}
		if !more {
			return
		}
		if !waiting {
			h.mu.Lock()
			l.awaitTakenLocked(ctx)
			stopping := h.stopping
			h.mu.Unlock()
			if stopping {
				return // giveBack took what was pending
			}
		}
	}
}

// awaitTakenLocked waits, l.hand.mu held, until Next has taken the pending claim or the
// subscription stopped pulling: a cancelled ctx brings giveBack, which sets stopping and takes
// the pending claim itself.
func (l *Source) awaitTakenLocked(ctx context.Context) {
	h := &l.hand
	for h.hasPending && !h.stopping {
		h.awaitTake = true
		h.mu.Unlock()
		select {
		case <-h.taken:
		case <-ctx.Done():
			<-h.taken // from Next, or from giveBack, which is on its way
		}
		h.mu.Lock()
	}
}

// aheadDone waits for the claimer's next cycle to end and returns what it claimed (nil:
// nothing, or the subscription stopped and it went back), the settlements it committed, its
// error and the wake-up to wait on.
func (l *Source) aheadDone() (<-chan struct{}, *batch, cycleDone, error) {
	h := &l.hand
	h.mu.Lock()
	h.waiting = true
	h.mu.Unlock()
	r := <-l.ahead.results
	if r.last {
		l.ahead.running = false
		l.settle.setClaiming(false)
	}
	h.mu.Lock()
	h.waiting = false
	b, done := h.pending, h.pendingDone
	h.takePendingLocked()
	h.mu.Unlock()
	return r.woken, b, done, r.err
}

// reportCycle reports the settlements the last claim cycle committed, if Next has not yet.
func (l *Source) reportCycle() {
	if l.ahead.unreported.l == nil {
		return
	}
	done := l.ahead.unreported
	l.ahead.unreported = cycleDone{}
	done.report()
}
