package rowlock

import (
	"context"

	"github.com/settlehq/settle/core/sqlqueue/driver"
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
func (r *Source) startAhead(b *batch) bool {
	rt, c := r.rt, &r.cl
	if c.ahead != nil || rt.Cfg.Transactional || !rt.Cfg.BatchAuto || r.rescue.rescuing || !b.full || b.ds[0].counted ||
		driver.IsSingleWriter(rt.D) || !c.mayAhead.Load() {
		return false
	}
	return r.hand.unlessStopping(func() { c.aheads.Add(1) }) // Close, which sets stopping first, waits for it
}

// claimAhead runs the next claim in the background; Next takes its outcome with aheadDone. A
// claim that ends after the subscription stopped pulling gives its rows back itself (claim).
func (r *Source) claimAhead(ctx context.Context) {
	c := &r.cl
	ch := make(chan claimResult, 1)
	c.ahead = ch
	woken := r.rt.Wake.Wait()
	go func() {
		defer c.aheads.Done()
		n, err := c.claim(ctx)
		if n > 0 {
			r.rt.Log.Debug("sqlqueue: claimed ahead of the workers", "queue", r.rt.Q.Name, "rows", n)
		}
		ch <- claimResult{woken: woken, n: n, err: err}
	}()
}

// aheadDone waits for the claim ahead and returns its outcome.
func (r *Source) aheadDone() (<-chan struct{}, int, error) {
	res := <-r.cl.ahead
	r.cl.ahead = nil
	return res.woken, res.n, res.err
}
