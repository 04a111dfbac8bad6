package sqlqueue

import (
	"context"
)

// This file is the row-lock form's claiming ahead. Next claims when every row of the open
// claims has been handed out; with one worker the claim's round trips then come between the
// last row of one claim and the first of the next, and the worker waits for them once per
// claim. While the automatic claim size sees claims come back full, settle cleanly and get
// through in under batchCycle, Next starts the next claim in the background as it hands out a
// claim's first row instead, so that it is open by the time the worker needs it: the rows of
// two claims are then locked at once, as they are with several workers, each claim in its own
// transaction (SKIP LOCKED keeps them apart). Not on a single-writer database (one open write
// transaction at a time), not in transactional mode (rows go out one at a time there), not with
// a BatchSize (a fixed size says how many rows one process holds), not while the claims ramp up
// after a start (they count their attempts then), and not while lapsed rows wait for a rescue.

// claimResult is how a claim ahead ended.
type claimResult struct {
	woken <-chan struct{} // the wake-up to wait on if it found nothing
	n     int
	err   error
}

// startAhead reports whether Next, handing out the first row of b, starts the next claim ahead.
func (r *rowLock) startAhead(b *rlBatch) bool {
	rt := r.rt
	if r.ahead != nil || rt.cfg.transactional || !rt.cfg.batchAuto || r.rescuing || !b.full || b.ds[0].counted ||
		IsSingleWriter(rt.d) || !r.mayAhead.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false
	}
	r.aheads.Add(1) // under r.mu: Close, which sets stopping under it first, waits for it
	return true
}

// claimAhead runs the next claim in the background; Next takes its outcome with aheadDone. A
// claim that ends after the subscription stopped pulling gives its rows back itself (claim).
func (r *rowLock) claimAhead(ctx context.Context) {
	ch := make(chan claimResult, 1)
	r.ahead = ch
	woken := r.rt.wake.wait()
	go func() {
		defer r.aheads.Done()
		n, err := r.claim(ctx)
		if n > 0 {
			r.rt.log.Debug("sqlqueue: claimed ahead of the workers", "queue", r.rt.q.name, "rows", n)
		}
		ch <- claimResult{woken: woken, n: n, err: err}
	}()
}

// aheadDone waits for the claim ahead and returns its outcome.
func (r *rowLock) aheadDone() (<-chan struct{}, int, error) {
	res := <-r.ahead
	r.ahead = nil
	return res.woken, res.n, res.err
}
