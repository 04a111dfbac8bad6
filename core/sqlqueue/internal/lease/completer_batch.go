package lease

import (
	"context"
	"errors"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// grouped is the completion strategy of finished deliveries settled together, in one
// transaction of their own: one token-fenced statement per token for the acks and drops, the
// others one by one. The settler's flushes use it (settler.go), and so does a claim cycle whose
// own transaction could not carry them (completer_claim.go).
type grouped struct{ src *Source }

// flush settles items in one transaction. When the group fails (a row lock waited past the lock
// timeout, a trigger refused one statement), each item is settled on its own, so that the
// failure is only its own delivery's.
//
// failed is how a grouped settlement of the same items ended just before (in a claim
// transaction or a pipeline; nil: none was tried). When that, or the group here, may have
// waited out the lock timeout for a row another session holds, the free rows are settled at
// once and the held ones failed (flushFree) instead of waiting for the lock again, once per row
// (InnoDB's timeout runs up to a second over), with every row queued behind it.
func (g grouped) flush(items []item, failed error) {
	l, rt := g.src, g.src.rt
	ctx, cancel := rt.Background(context.Background())
	defer cancel()
	if g.mayBeHeld(failed) && g.flushFree(ctx, items) {
		return
	}
	now := rt.Now()
	lost := make([]bool, len(items))
	err := g.inTx(ctx, items, lost, now, g.settleIn)
	if err == errMismatch {
		clear(lost)
		err = g.inTx(ctx, items, lost, now, g.settleEach)
	}
	if g.mayBeHeld(err) && g.flushFree(ctx, items) {
		return
	}
	if err != nil && len(items) > 1 {
		for i := range items {
			one := items[i : i+1]
			lost := []bool{false}
			l.report(one, lost, g.inTx(ctx, one, lost, rt.Now(), g.settleEach))
		}
		return
	}
	l.report(items, lost, err)
}

// mayBeHeld reports whether a grouped settlement that failed with err may have waited for a row
// another session holds: a database whose rows lock one by one, and a failure other than a row
// count (a lost lease, which settling each row finds).
func (g grouped) mayBeHeld(err error) bool {
	return err != nil && g.src.rt.RowLocks != nil && err != errMismatch && !errors.Is(err, driver.ErrRowCount)
}

// flushFree settles, in one transaction, the items whose rows it can lock without waiting, and
// fails the others at once with ErrRowHeld (their settlements are retried like any failed one).
// It reports false, having settled nothing, when it could not tell (a statement failed, or a
// grouped statement matched fewer rows than it names): the caller then settles item by item.
func (g grouped) flushFree(ctx context.Context, items []item) bool {
	l, rt := g.src, g.src.rt
	tx, err := rt.Begin(ctx)
	if err != nil {
		return false
	}
	ds := make([]*delivery, len(items))
	for i, it := range items {
		ds[i] = it.d
	}
	got, err := l.lockRows(ctx, tx, ds, false)
	if err != nil {
		_ = tx.Rollback(ctx)
		return false
	}
	var free, held []item
	for _, it := range items {
		if got[it.d.RowID()] {
			free = append(free, it)
		} else {
			held = append(held, it)
		}
	}
	if len(held) == 0 {
		// Nothing held now: the group failed for another reason (or the holder is gone).
		_ = tx.Rollback(ctx)
		return false
	}
	lost := make([]bool, len(free))
	if err := g.settleIn(ctx, tx, free, lost, rt.Now()); err != nil {
		_ = tx.Rollback(ctx)
		return false
	}
	if err := tx.Commit(ctx); err != nil {
		return false
	}
	l.report(free, lost, nil)
	for _, it := range held {
		l.report([]item{it}, nil, &RowHeldError{Queue: rt.Q.Name, Table: rt.Table, ID: it.d.RowID(), Attempt: it.d.Attempt()})
	}
	return true
}

type mismatch struct{}

func (mismatch) Error() string {
	return "sqlqueue: grouped settlement matched fewer rows than it settles"
}

// errMismatch is a grouped statement that matched fewer rows than it names: one of them lost
// its lease, which settling each row finds.
var errMismatch error = mismatch{}

// inTx runs settle (settleIn or settleEach) in a transaction of its own and commits.
func (g grouped) inTx(ctx context.Context, items []item, lost []bool, now time.Time,
	settle func(context.Context, driver.Queryer, []item, []bool, time.Time) error) error {
	tx, err := g.src.rt.Begin(ctx)
	if err != nil {
		return err
	}
	if err := settle(ctx, tx, items, lost, now); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// settleIn runs the grouped settlement of items in tx, neither committing nor rolling back:
// one statement per token for the acks and drops (errMismatch when one matches fewer rows than
// it names), the others one by one.
func (g grouped) settleIn(ctx context.Context, tx driver.Queryer, items []item, lost []bool, now time.Time) error {
	for _, st := range g.doneSteps(nil, items, now) {
		r, err := tx.Exec(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		if r.RowsAffected != st.Want {
			return errMismatch
		}
	}
	for i, it := range items {
		if isDone(it.v.Action) {
			continue
		}
		ok, err := g.src.settleOne(ctx, tx, it.d, it.v, now)
		if err != nil {
			return err
		}
		lost[i] = !ok
	}
	return nil
}

// settleEach settles every item with its own fenced statement in tx.
func (g grouped) settleEach(ctx context.Context, tx driver.Queryer, items []item, lost []bool, now time.Time) error {
	for i, it := range items {
		ok, err := g.src.settleOne(ctx, tx, it.d, it.v, now)
		if err != nil {
			return err
		}
		lost[i] = !ok
	}
	return nil
}

// doneSteps appends to steps the grouped settlement of the ack and drop items, one statement
// per token, each wanting exactly its rows; other items are left out.
func (g grouped) doneSteps(steps []driver.Step, items []item, now time.Time) []driver.Step {
	rt, st := g.src.rt, g.src.st
	handled := make([]bool, len(items))
	for i, it := range items {
		if handled[i] || !isDone(it.v.Action) {
			continue
		}
		tok := it.d.token
		args := make([]any, 0, 2+len(items)-i)
		if st.DoneMark {
			args = append(args, rt.D.Time(now))
		}
		args = append(args, rt.D.Time(tok))
		ids := 0
		for j := i; j < len(items); j++ {
			if !handled[j] && isDone(items[j].v.Action) && items[j].d.token.Equal(tok) {
				handled[j] = true
				args = append(args, items[j].d.RowID())
				ids++
			}
		}
		steps = append(steps, driver.Step{SQL: st.doneMany.SQL(ids), Args: args, Want: int64(ids)})
	}
	return steps
}

func isDone(a core.Action) bool { return a == core.ActAck || a == core.ActDrop }
