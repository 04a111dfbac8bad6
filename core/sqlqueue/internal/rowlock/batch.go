package rowlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// batch is one claim: its transaction, which holds its rows locked until every one of them is
// finished, and what their settlements did in it.
type batch struct {
	tx   driver.Transaction
	ds   []delivery
	at   time.Time // when it was claimed
	full bool      // it took as many rows as it asked for

	mu      sync.Mutex
	next    int  // next row to hand out
	left    int  // rows not yet finished
	busy    bool // transactional mode: a row is with a handler
	failed  error
	culprit *delivery // whose statement failed the claim
	results []item
	untake  []any // counted rows given back unhanded: their count and mark are taken back
}

// item is one finished delivery of a claim, reported when the claim ends.
type item struct {
	d       *delivery
	v       core.Verdict
	settled core.Settled
	err     error // this delivery's own statement failed (the claim still commits)
}

// settleLocked runs d's statement for v in its claim's transaction, where it runs one now (b.mu
// is held): a handler's writes are kept (ack) or rolled back to their savepoint first; a custom
// event runs behind a savepoint of its own; a grouped ack or drop waits for the claim's commit.
// ctx is the statement context taken, nil when none ran; own is d's own failure, which does not
// fail the claim.
func (r *Source) settleLocked(b *batch, d *delivery, v core.Verdict) (ctx context.Context, own error) {
	rt := r.rt
	h := d.OpenTx()
	// Statements run under a statement context (the settlement outlives a cancelled handler,
	// and runs under a deadline), taken only where one runs: a grouped ack or drop runs none
	// before its claim's last row.
	if h != nil || (b.failed == nil && !r.grouped(v)) {
		ctx = rt.StmtCtx()
	}
	if h != nil {
		h.Close()
		r.endSavepoint(ctx, b, d, v)
	}
	switch {
	case b.failed != nil || r.grouped(v):
	case rt.EventFor(v.Action) != nil:
		own, b.failed = r.isolated(ctx, b, d, v)
		if b.failed != nil {
			b.culprit = d
		}
	default:
		if _, err := rt.Settle(ctx, b.tx, r.st.settlements(d.counted), &d.Delivery, time.Time{}, v, rt.Now()); err != nil {
			b.failed, b.culprit = err, d
		}
	}
	return ctx, own
}

// endSavepoint keeps the writes of d's handler (an ack) or rolls them back to their savepoint,
// in its claim's transaction; b.mu is held.
func (r *Source) endSavepoint(ctx context.Context, b *batch, d *delivery, v core.Verdict) {
	if b.failed != nil {
		return
	}
	sp := "RELEASE SAVEPOINT settle_delivery"
	if v.Action != core.ActAck {
		sp = "ROLLBACK TO SAVEPOINT settle_delivery"
	}
	if _, err := b.tx.Exec(ctx, sp); err != nil {
		b.failed, b.culprit = err, d
	} else if v.Action != core.ActAck {
		if _, err := b.tx.Exec(ctx, "RELEASE SAVEPOINT settle_delivery"); err != nil {
			b.failed, b.culprit = err, d
		}
	}
}

// isolated runs a custom event's statements behind a savepoint: the service's own SQL may fail
// for one row, and that must not roll back the settlements of the rest of the claim. A failed
// event is undone to the savepoint and reported for its delivery alone (own); its row is left
// as it was and comes back after the claim commits. fatal is set when the savepoint itself
// fails, which fails the whole claim.
func (r *Source) isolated(ctx context.Context, b *batch, d *delivery, v core.Verdict) (own, fatal error) {
	rt := r.rt
	if _, err := b.tx.Exec(ctx, "SAVEPOINT settle_event"); err != nil {
		return nil, err
	}
	st := r.st.settlements(d.counted)
	if _, err := rt.Settle(ctx, b.tx, st, &d.Delivery, time.Time{}, v, rt.Now()); err != nil {
		if _, rerr := b.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT settle_event"); rerr != nil {
			return nil, rerr
		}
		own = err
		// The row is held back in the claim's own transaction: its lock is not released
		// before the hold is in it, so no other claim takes it at once.
		until, _ := rt.Holds.Failed(&d.Delivery, v, own)
		if !rt.Holds.Hold(ctx, b.tx, st, &d.Delivery, time.Time{}, v, own, until) {
			if _, rerr := b.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT settle_event"); rerr != nil {
				return nil, rerr
			}
		}
	}
	if _, err := b.tx.Exec(ctx, "RELEASE SAVEPOINT settle_event"); err != nil {
		return nil, err
	}
	return own, nil
}

// grouped reports whether v's statement waits for the claim's commit, to run as one statement
// with the others' (GroupedRowLock).
func (r *Source) grouped(v core.Verdict) bool {
	cfg := &r.rt.Cfg
	return r.st.grouped.on && isDone(v.Action) && !cfg.Transactional && !cfg.PerMessage && r.rt.EventFor(v.Action) == nil
}

func isDone(a core.Action) bool { return a == core.ActAck || a == core.ActDrop }

// commit ends a claim whose rows are all finished and reports every settlement.
func (r *Source) commit(ctx context.Context, b *batch) {
	err := b.failed
	ended := false
	if err == nil {
		ended, err = r.settleGrouped(ctx, b, len(b.untake) == 0)
	}
	if err == nil && len(b.untake) > 0 {
		_, err = b.tx.Exec(ctx, r.st.untakeIDs.SQL(len(b.untake)), b.untake...)
	}
	switch {
	case ended:
	case err == nil:
		err = b.tx.Commit(ctx)
	default:
		_ = b.tx.Rollback(ctx)
	}
	if err != nil && b.culprit == nil && len(b.results) == 1 {
		b.culprit = b.results[0].d // a claim of one row that fails is that row's failure
	}
	r.cl.adapt(b, err)
	r.holdFailed(b, err)
	for _, it := range b.results {
		e := err
		if e == nil {
			e = it.err
		}
		if e == nil {
			r.rt.WakeAfter(it.v)
		}
		if it.settled != nil {
			it.settled(it.d, it.v, e)
		}
	}
}

// settleGrouped runs the grouped acks and drops of a finished claim in its transaction: their
// ids in ascending order, at most the flush size per statement, each statement matching every
// row it names. With commit, on a PipelinedTx, the last statement goes with the claim's COMMIT
// in one round trip (its row count checked on the server before the commit): ended then says
// that the transaction has ended, committed unless err says otherwise.
func (r *Source) settleGrouped(ctx context.Context, b *batch, commit bool) (ended bool, err error) {
	rt := r.rt
	ids := make([]int64, 0, len(b.results))
	for _, it := range b.results {
		if r.grouped(it.v) {
			ids = append(ids, it.d.RowID())
		}
	}
	slices.Sort(ids)
	pt, pipelined := b.tx.(driver.PipelinedTx)
	for i := 0; i < len(ids); i += rt.Cfg.MaxFlush {
		part := ids[i:min(i+rt.Cfg.MaxFlush, len(ids))]
		sql, args := r.groupedStatement(part)
		if commit && pipelined && i+len(part) == len(ids) {
			// The statement's row count is checked on the server, before the COMMIT, unless the
			// engine's own claim (not a counted relock) holds every row it names locked: no
			// other session can have changed or deleted them, so it changes each one, and the
			// check (a CTE over RETURNING, about a fifth of the DELETE's time on PostgreSQL)
			// proves nothing.
			want := int64(len(part))
			if r.cl.ownLock && !b.ds[0].counted {
				want = 0
			}
			if err := pt.CommitWith(ctx, driver.Step{SQL: sql, Args: args, Want: want}); err != nil {
				return true, fmt.Errorf("sqlqueue: queue %q on table %s: settling %d claimed rows: %w", rt.Q.Name, rt.Table, len(part), err)
			}
			return true, nil
		}
		res, err := b.tx.Exec(ctx, sql, args...)
		if err == nil && res.RowsAffected != int64(len(part)) {
			err = fmt.Errorf("sqlqueue: queue %q on table %s: settling %d claimed rows matched %d", rt.Q.Name, rt.Table, len(part), res.RowsAffected)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// groupedStatement is the statement that settles ids, with its arguments: the dialect's own
// (GroupedRowLockSQL: the ids, then the time where the table marks processed_at; or
// GroupedRowLockArray: the ids as one array, then the time), or the engine's IN-list (the time,
// then the ids).
func (r *Source) groupedStatement(ids []int64) (string, []any) {
	rt, g := r.rt, &r.st.grouped
	mark := r.st.settle.DoneMark
	args := make([]any, 0, len(ids)+1)
	switch {
	case g.byIDs != nil:
		for _, id := range ids {
			args = append(args, id)
		}
		if mark {
			args = append(args, rt.D.Time(rt.Now()))
		}
		return g.byCount.Get(len(ids), func(n int) string {
			return g.byIDs.SettleByIDs(rt.S.QTable, rt.S.ID, rt.S.ProcessedAt, n)
		}), args
	case g.byArray != "":
		args = append(args, ids)
		if mark {
			args = append(args, rt.D.Time(rt.Now()))
		}
		return g.byArray, args
	}
	if mark {
		args = append(args, rt.D.Time(rt.Now()))
	}
	for _, id := range ids {
		args = append(args, id)
	}
	return r.st.doneIDs.SQL(len(ids)), args
}

// holdFailed holds back, for its failure backoff, the row whose statement failed the claim
// (err): after the rollback, so another claim may take it once first (a row whose custom event
// failed behind a savepoint was held in the claim's transaction). It forgets the failures of
// the rows that settled.
func (r *Source) holdFailed(b *batch, err error) {
	rt := r.rt
	for _, it := range b.results {
		switch {
		case err != nil && it.d == b.culprit && it.v.Action != core.ActAbandon:
			until, _ := rt.Holds.Failed(&it.d.Delivery, it.v, err)
			rt.Holds.HoldAlone(r.st.settlements(it.d.counted), &it.d.Delivery, time.Time{}, it.v, err, until)
		case err == nil && it.err == nil:
			rt.Holds.Settled(it.d.RowID())
		}
	}
}
