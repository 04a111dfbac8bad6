package rowlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/batching"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file is the row-lock form's claiming. Two things bound what a row that never settles
// (its handler kills the process, say) can do:
//
//   - the claim size adapts: it starts at one row and doubles with every claim that commits
//     cleanly, up to BatchSize, and halves with every claim that rolls back or gives rows back
//     abandoned. A process restarted after a crash claims the oldest rows, where the poison row
//     is, in the smallest claims, so the poison row ends up claimed alone and the rows around
//     it settle in claims of their own;
//   - with a committed count (CountAtClaim; by default with DeadLetterAfter, in the claims made
//     while the size is below BatchSize, which is where a restarted process meets its poison
//     row), the attempt is counted and committed before the rows are locked, so a crash does
//     not roll it back and core's cap ends the loop: the delivery past the cap goes to the dead
//
// claimer is the row-lock form's claiming. Claims run in Next (core never calls it concurrently)
// or, one at a time, ahead of it (ahead.go); what they share with the claims' commits (the size,
// whether the next may run ahead) is atomic.
type claimer struct {
	src *Source
	buf []driver.Claimed // the rows of a claim, reused from claim to claim
	// size is how many rows the next claim takes: it starts at one and doubles with every claim
	// that commits cleanly, up to BatchSize, and halves with every claim that fails or gives
	// rows back abandoned (adapt).
	size     atomic.Int32
	mayAhead atomic.Bool // set as claims end: the next claim may run ahead (ahead.go)
	count    countMode   // when the claims count attempts (count.go)
	ownLock  bool        // the claim is the engine's own, and locks the rows it takes (settleGrouped)

	ahead  chan claimResult // the claim ahead's outcome; nil when none runs (Next's)
	aheads sync.WaitGroup   // the claim ahead, while it runs
}

// claim takes up to the claim size of ready rows in a transaction that stays open until they
// are settled; it returns how many it took.
func (c *claimer) claim(ctx context.Context) (int, error) {
	r, rt := c.src, c.src.rt
	now := rt.Now()
	size := int(c.size.Load())
	pl, ok, err := c.plan(ctx, now, size)
	if err != nil || !ok {
		return 0, err
	}
	p, counted, lapsed := pl.p, pl.counted, pl.lapsed
	// The claim transaction outlives this call: only the settlement ends it.
	tx, err := c.begin(context.WithoutCancel(ctx))
	if err != nil {
		return 0, err
	}
	var rows []driver.Claimed
	if counted == nil {
		rows, err = rt.Claim(ctx, r.st.claim, tx, p, c.buf[:0])
	} else {
		rows, err = c.relock(ctx, tx, p, counted)
	}
	if err == nil {
		rows = c.passOver(rows, now)
	}
	if err != nil || len(rows) == 0 {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return 0, err
	}
	c.buf = rows[:0]
	b := &batch{tx: tx, left: len(rows), at: now, full: len(rows) == size, results: make([]item, 0, len(rows))}
	b.ds = newDeliveries(rt, rows, b, counted != nil, lapsed)
	clear(rows)
	if lapsed {
		r.rescue.rescued(true)
	}
	r.busy.Add(len(b.ds))
	if !r.hand.add(b) { // stopped while claiming: hand nothing out
		r.giveBack([]*batch{b})
		return 0, nil
	}
	return len(b.ds), nil
}

// claimPlan is what a claim takes: its params, and when it counted attempts first, the rows it
// counted (a lapsed one, alone, when a rescue was due).
type claimPlan struct {
	p       driver.ClaimParams
	counted map[int64]int
	lapsed  bool
}

// plan decides what the next claim takes, at now, of size rows; ok is false when it claims
// nothing for now (lapsed rows wait for the claimed rows to finish, or the count found no row).
func (c *claimer) plan(ctx context.Context, now time.Time, size int) (pl claimPlan, ok bool, err error) {
	r, rt := c.src, c.src.rt
	// Rows held back after a failed settlement are not handed out (their hold may be in memory
	// only): the claim takes that many more, and leaves them as they are.
	pl.p = driver.ClaimParams{Now: now, Limit: size + rt.Holds.Count(now), Group: rt.Q.Group}
	if r.st.lapsedSel != "" {
		take, hold, err := r.rescue.due(ctx)
		if err != nil || hold {
			return claimPlan{}, false, err
		}
		pl.lapsed = take
	}
	if pl.lapsed {
		pl.p.Limit = 1 + rt.Holds.Count(now)
		if pl.counted, err = c.countRows(ctx, pl.p, true); err != nil {
			return claimPlan{}, false, err
		}
		if len(pl.counted) == 0 {
			r.rescue.rescued(false)
			pl.lapsed = false
		}
	}
	if !pl.lapsed && c.counts(size) {
		if pl.counted, err = c.countRows(ctx, pl.p, false); err != nil || len(pl.counted) == 0 {
			return claimPlan{}, false, err
		}
	}
	return pl, true, nil
}

// counts reports whether a claim of size rows counts attempts at claim.
func (c *claimer) counts(size int) bool {
	batch := c.src.rt.Cfg.Batch
	return c.count == countAlways || (c.count == countRamp && (size < batch || batch == 1))
}

// begin opens a claim's transaction: on a TxPipeliner outside transactional mode (whose handlers
// unwrap the driver's own transaction) one whose BEGIN goes with the claim, and whose COMMIT
// goes with the claim's grouped settlement (settleGrouped).
func (c *claimer) begin(ctx context.Context) (driver.Transaction, error) {
	rt := c.src.rt
	if tp, ok := rt.DB.(driver.TxPipeliner); ok && !rt.Cfg.Transactional {
		return tp.BeginPipelined(ctx)
	}
	return rt.DB.Begin(ctx)
}

// passOver drops from rows those held back after a failed settlement: they stay locked, as they
// are, until the claim ends.
func (c *claimer) passOver(rows []driver.Claimed, now time.Time) []driver.Claimed {
	rt := c.src.rt
	if !rt.Holds.Any() {
		return rows
	}
	keep := rows[:0]
	for _, r := range rows {
		if !rt.Holds.HeldBack(r.ID, now) {
			keep = append(keep, r)
		}
	}
	clear(rows[len(keep):])
	return keep
}

// adapt sets the next claim's size after claim b ended with err: doubled after a clean commit,
// halved after a rollback or when rows were given back abandoned.
func (c *claimer) adapt(b *batch, err error) {
	rt := c.src.rt
	if err != nil && b.ds[0].counted {
		c.src.rescue.lapsedNow() // its marked rows lapsed: look for them at the next claim
	}
	clean := err == nil
	for _, it := range b.results {
		clean = clean && it.err == nil && it.v.Action != core.ActAbandon
	}
	clean = clean && len(b.results) == len(b.ds) // none given back unhanded
	// Up to the base size (BatchSize, or 10 per worker) a clean claim doubles the next; past it,
	// with no BatchSize, the claim's time from claim to commit sizes the next (batching.Next):
	// the claim's transaction stays open while its rows wait for workers.
	base := int32(rt.Cfg.Batch)
	took := rt.Now().Sub(b.at)
	// Full, clean and got through fast, past the ramp: the next claim may run ahead of the
	// workers (ahead.go).
	c.mayAhead.Store(clean && rt.Cfg.BatchAuto && b.full && !b.ds[0].counted && took < batching.Cycle && c.size.Load() >= base)
	for {
		cur := c.size.Load()
		next := max(cur/2, 1)
		switch {
		case clean && rt.Cfg.BatchAuto && cur >= base:
			next = int32(batching.Next(int(cur), int(base), rt.Cfg.BatchMax, b.full, took))
		case clean:
			next = min(cur*2, base)
		}
		if next == cur || c.size.CompareAndSwap(cur, next) {
			return
		}
	}
}
