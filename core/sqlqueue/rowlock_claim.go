package sqlqueue

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
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
//     letter without its handler.

// claim takes up to the claim size of ready rows in a transaction that stays open until they
// are settled; it returns how many it took.
func (r *rowLock) claim(ctx context.Context) (int, error) {
	rt := r.rt
	now := rt.now()
	size := int(r.size.Load())
	// Rows held back after a failed settlement are not handed out (their hold may be in memory
	// only): the claim takes that many more, and leaves them as they are.
	p := ClaimParams{Now: now, Limit: size + rt.heldCount(now), Group: rt.q.group}
	var counted map[int64]int
	lapsed := false
	if rt.st.lapsedSel != "" {
		take, hold, err := r.rescueDue(ctx)
		if err != nil || hold {
			return 0, err
		}
		lapsed = take
	}
	if lapsed {
		var err error
		p.Limit = 1 + rt.heldCount(now)
		if counted, err = r.count(ctx, p, true); err != nil {
			return 0, err
		}
		if len(counted) == 0 {
			r.rescued(false)
			lapsed = false
		}
	}
	if !lapsed && (rt.count == countAlways || (rt.count == countRamp && (size < rt.cfg.batch || rt.cfg.batch == 1))) {
		var err error
		if counted, err = r.count(ctx, p, false); err != nil || len(counted) == 0 {
			return 0, err
		}
	}
	// The claim transaction outlives this call: only the settlement ends it.
	tx, err := r.begin(context.WithoutCancel(ctx))
	if err != nil {
		return 0, err
	}
	var rows []Claimed
	if counted == nil {
		rows, err = rt.doClaim(ctx, tx, p, r.claimBuf[:0])
	} else {
		rows, err = r.relock(ctx, tx, p, counted)
	}
	if err == nil {
		rows = r.passOver(rows, now)
	}
	if err != nil || len(rows) == 0 {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return 0, err
	}
	r.claimBuf = rows[:0]
	b := &rlBatch{tx: tx, ds: newDeliveries(rt, rows), left: len(rows), at: now, full: len(rows) == size,
		results: make([]item, 0, len(rows))}
	clear(rows)
	for i := range b.ds {
		b.ds[i].rb, b.ds[i].counted, b.ds[i].suspect = b, counted != nil, lapsed
	}
	if lapsed {
		r.rescued(true)
	}
	r.busy.add(len(b.ds))
	r.mu.Lock()
	if r.stopping { // stopped while claiming: hand nothing out
		r.mu.Unlock()
		r.giveBack([]*rlBatch{b})
		return 0, nil
	}
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return len(b.ds), nil
}

// begin opens a claim's transaction: on a TxPipeliner outside transactional mode (whose
// handlers unwrap the driver's own transaction) one whose BEGIN goes with the claim, and whose
// COMMIT goes with the claim's grouped settlement (settleGrouped).
func (r *rowLock) begin(ctx context.Context) (Transaction, error) {
	if tp, ok := r.rt.db.(TxPipeliner); ok && !r.rt.cfg.transactional {
		return tp.BeginPipelined(ctx)
	}
	return r.rt.db.Begin(ctx)
}

// count commits attempt + 1 on up to p.Limit ready rows, oldest first, in a transaction of its
// own that locks them (skipping rows another claim holds), and returns each counted row's new
// attempt.
//
// With lapsed it counts the rows whose counted claim ended without a settlement instead
// (rowlock_rescue.go). Where the table has locked_until, the count marks the rows there.
func (r *rowLock) count(ctx context.Context, p ClaimParams, lapsed bool) (map[int64]int, error) {
	rt := r.rt
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: a no-op
	sel, b := rt.st.countSel, rt.st.countB
	if lapsed {
		sel, b = rt.st.lapsedSel, rt.st.lapsedB
	}
	rows, err := tx.Query(ctx, sel, b.Bind(p, nil)...)
	if err != nil {
		return nil, err
	}
	counted := make(map[int64]int, p.Limit)
	var ids []any
	if rt.st.lapsedSel != "" {
		ids = append(ids, rt.d.Time(p.Now)) // the mark
	}
	marks := len(ids)
	for rows.Next() {
		var id, att int64
		if err := rows.Scan(&id, &att); err != nil {
			rows.Close()
			return nil, err
		}
		if rt.heldBack(id, p.Now) {
			continue // not handed out: not counted
		}
		if lapsed && len(counted) == 1 {
			continue // a lapsed row is taken alone
		}
		counted[id] = int(att)
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(ids) == marks {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, rt.st.countUpd.SQL(len(ids)-marks), ids...); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return counted, nil
}

// relock locks, in the claim transaction, the rows count committed, skipping any that another
// claim took in between (it holds them, or has counted them again): a row is handed out only
// with the attempt this claim counted.
func (r *rowLock) relock(ctx context.Context, tx Queryer, p ClaimParams, counted map[int64]int) ([]Claimed, error) {
	rt := r.rt
	args := rt.st.relockB.Bind(p, make([]any, 0, rt.st.relockB.Len()+len(counted)))
	for id := range counted {
		args = append(args, id)
	}
	rows, err := tx.Query(ctx, rt.st.relock.SQL(len(counted)), args...)
	if err != nil {
		return nil, err
	}
	got, err := driver.ScanClaimed(rt.d, rows, r.claimBuf[:0], true)
	if err != nil {
		return nil, err
	}
	keep := got[:0]
	for _, c := range got {
		if counted[c.ID] == c.Attempt {
			keep = append(keep, c)
		}
	}
	clear(got[len(keep):])
	return keep, nil
}

// passOver drops from rows those held back after a failed settlement: they stay locked, as
// they are, until the claim ends.
func (r *rowLock) passOver(rows []Claimed, now time.Time) []Claimed {
	if r.rt.fails.n.Load() == 0 {
		return rows
	}
	keep := rows[:0]
	for _, c := range rows {
		if !r.rt.heldBack(c.ID, now) {
			keep = append(keep, c)
		}
	}
	clear(rows[len(keep):])
	return keep
}

// adapt sets the next claim's size after batch b ended with err: doubled after a clean commit,
// halved after a rollback or when rows were given back abandoned.
func (r *rowLock) adapt(b *rlBatch, err error) {
	if err != nil && b.ds[0].counted {
		r.lapsedNow() // its marked rows lapsed: look for them at the next claim
	}
	clean := err == nil
	for _, it := range b.results {
		clean = clean && it.err == nil && it.v.Action != core.ActAbandon
	}
	clean = clean && len(b.results) == len(b.ds) // none given back unhanded
	// Up to the base size (BatchSize, or 10 per worker) a clean claim doubles the next; past
	// it, with no BatchSize, the claim's time from claim to commit sizes the next (sized): the
	// claim's transaction stays open while its rows wait for workers.
	rt := r.rt
	base := int32(rt.cfg.batch)
	took := rt.now().Sub(b.at)
	// Full, clean and got through fast, past the ramp: the next claim may run ahead of the
	// workers (rowlock_ahead.go).
	r.mayAhead.Store(clean && rt.cfg.batchAuto && b.full && !b.ds[0].counted && took < batchCycle && r.size.Load() >= base)
	for {
		cur := r.size.Load()
		next := max(cur/2, 1)
		switch {
		case clean && rt.cfg.batchAuto && cur >= base:
			next = sized(cur, base, int32(rt.cfg.batchMax), b.full, took)
		case clean:
			next = min(cur*2, base)
		}
		if next == cur || r.size.CompareAndSwap(cur, next) {
			return
		}
	}
}
