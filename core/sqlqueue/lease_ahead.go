package sqlqueue

import (
	"context"
)

// This file is the lease form's claiming ahead. A claim cycle (settle what has finished, claim
// the next batch, commit) waits on the database: on SQLite for the file's write and sync, on a
// server for its round trips and commit. Run when the workers have handed out the last row of
// a claim, it leaves them idle for that long, and the database idle while they handle the
// claim. While the automatic claim size (no BatchSize) sees claims come back full and the
// workers get through each in under batchCycle, Next instead starts a claimer goroutine as it
// hands out a claim's first row, and the database works on the next claim while the workers
// handle this one. Each cycle settles what finished before it began (the claim before).
//
// The claimer goes on from one cycle to the next without a pause while the workers keep up
// (Next is already waiting for the claim it just made): a pause would cost a goroutine's wake-up
// on another core, which on a virtual machine is a sizeable part of a small claim's time.
// Otherwise it waits for Next to take the claim it made before it makes another. A process
// thus holds at most the claim its workers handle and one claimed ahead. A claim ahead is
// tracked as soon as it is taken (its leases are extended, a rescue waits for it), and handed
// back at once, uncounted, when the subscription stops pulling, like the unhanded rows of the
// current claim. The claimer stops when a claim comes back short or empty, the workers slow
// down, a cycle fails, or a rescue of lapsed rows is due; Next then claims in the foreground
// until the claims are full and fast again.

// aheadResult is how one of the claimer's cycles ended; its batch and the settlements it
// committed, if any, are in l.pending and l.pendingDone.
type aheadResult struct {
	woken <-chan struct{} // the wake-up to wait on if the claim found nothing
	err   error
	last  bool // the claimer stopped after this cycle
}

// startAheadLocked reports whether Next, handing out the first row of a claim, starts the
// claimer; l.srcMu is held. When it does, the claimer counts as running from here on (Close
// waits for it).
func (l *lease) startAheadLocked() bool {
	if l.ahead || l.stopping || !l.mayAhead || l.rescuing {
		return false
	}
	l.aheads.Add(1)
	return true
}

// claimAhead starts the claimer; Next takes each cycle's outcome with aheadDone.
func (l *lease) claimAhead(ctx context.Context) {
	l.ahead = true
	l.setClaiming(true)
	go l.claimer(ctx)
}

// claimer runs claim cycles ahead of the workers (see the top of this file).
func (l *lease) claimer(ctx context.Context) {
	defer l.aheads.Done()
	for {
		woken := l.rt.wake.wait()
		b, done, err := l.cycle(ctx)
		more := err == nil && b != nil && l.mayAhead && !l.rescuing
		l.srcMu.Lock()
		l.awaitTakenLocked(ctx) // one claim ahead at most
		if l.stopping {
			l.pending, l.pendingDone = b, done
			l.srcMu.Unlock()
			_ = l.giveBack() // it logs a failure; the rows come back when their leases run out
			select {
			case l.results <- aheadResult{woken: woken, err: err, last: true}:
			default:
			}
			return
		}
		l.pending, l.pendingDone, l.hasPending = b, done, true
		// Next already waits for this claim, so it takes it at once: go on to the next one.
		waiting := l.waiting
		l.srcMu.Unlock()
		if b != nil {
			l.rt.log.Debug("sqlqueue: claimed ahead of the workers", "queue", l.rt.q.name, "rows", len(b.ds))
		}
		l.results <- aheadResult{woken: woken, err: err, last: !more}
		if !more {
			return
		}
		if !waiting {
			l.srcMu.Lock()
			l.awaitTakenLocked(ctx)
			stopping := l.stopping
			l.srcMu.Unlock()
			if stopping {
				return // giveBack took what was pending
			}
		}
	}
}

// awaitTakenLocked waits, l.srcMu held, until Next has taken the pending claim or the
// subscription stopped pulling: a cancelled ctx brings giveBack, which sets stopping and takes
// the pending claim itself.
func (l *lease) awaitTakenLocked(ctx context.Context) {
	for l.hasPending && !l.stopping {
		l.awaitTake = true
		l.srcMu.Unlock()
		select {
		case <-l.taken:
		case <-ctx.Done():
			<-l.taken // from Next, or from giveBack, which is on its way
		}
		l.srcMu.Lock()
	}
}

// aheadDone waits for the claimer's next cycle to end and returns what it claimed (nil:
// nothing, or the subscription stopped and it went back), the settlements it committed, its
// error and the wake-up to wait on.
func (l *lease) aheadDone() (<-chan struct{}, *leaseBatch, cycleDone, error) {
	l.srcMu.Lock()
	l.waiting = true
	l.srcMu.Unlock()
	r := <-l.results
	if r.last {
		l.ahead = false
		l.setClaiming(false)
	}
	l.srcMu.Lock()
	l.waiting = false
	b, done := l.pending, l.pendingDone
	l.takePendingLocked()
	l.srcMu.Unlock()
	return r.woken, b, done, r.err
}

// takePendingLocked empties the claim ahead's slot and lets a claimer waiting for that go on;
// l.srcMu is held.
func (l *lease) takePendingLocked() {
	l.pending, l.pendingDone, l.hasPending = nil, cycleDone{}, false
	if l.awaitTake {
		l.awaitTake = false
		l.taken <- struct{}{}
	}
}

// reportCycle reports the settlements the last claim cycle committed, if Next has not yet.
func (l *lease) reportCycle() {
	if l.unreported.l == nil {
		return
	}
	done := l.unreported
	l.unreported = cycleDone{}
	done.report()
}

// setClaiming records whether a claimer runs. Clearing it wakes nobody: Next is about to hand
// out what the last cycle took; what is queued meanwhile goes with a finish or the linger.
func (l *lease) setClaiming(on bool) {
	l.qmu.Lock()
	l.claiming = on
	l.qmu.Unlock()
}
