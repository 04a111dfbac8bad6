package rowlock

import (
	"context"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file is counting at claim (CountAtClaim): a claim that counts commits attempt + 1 on
// the rows it picks before it locks them again in its own transaction, so that a crash, which
// rolls that transaction back, does not undo the count.

// countRows commits attempt + 1 on up to p.Limit ready rows, oldest first, in a transaction of its
// own that locks them (skipping rows another claim holds), and returns each counted row's new
// attempt.
//
// With lapsed it counts the rows whose counted claim ended without a settlement instead
// (rescue.go). Where the table has locked_until, the count marks the rows there.
func (c *claimer) countRows(ctx context.Context, p driver.ClaimParams, lapsed bool) (map[int64]int, error) {
	rt, st := c.src.rt, c.src.st
	tx, err := rt.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: a no-op
	sel, b := st.countSel, st.countB
	if lapsed {
		sel, b = st.lapsedSel, st.lapsedB
	}
	rows, err := tx.Query(ctx, sel, b.Bind(p, nil)...)
	if err != nil {
		return nil, err
	}
	counted := make(map[int64]int, p.Limit)
	var ids []any
	if st.lapsedSel != "" {
		ids = append(ids, rt.D.Time(p.Now)) // the mark
	}
	marks := len(ids)
	for rows.Next() {
		var id, att int64
		if err := rows.Scan(&id, &att); err != nil {
			rows.Close()
			return nil, err
		}
		if rt.Holds.HeldBack(id, p.Now) {
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
	if _, err := tx.Exec(ctx, st.countUpd.SQL(len(ids)-marks), ids...); err != nil {
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
func (c *claimer) relock(ctx context.Context, tx driver.Queryer, p driver.ClaimParams, counted map[int64]int) ([]driver.Claimed, error) {
	rt, st := c.src.rt, c.src.st
	args := st.relockB.Bind(p, make([]any, 0, st.relockB.Len()+len(counted)))
	for id := range counted {
		args = append(args, id)
	}
	rows, err := tx.Query(ctx, st.relock.SQL(len(counted)), args...)
	if err != nil {
		return nil, err
	}
	got, err := driver.ScanClaimed(rt.D, rows, c.buf[:0], true)
	if err != nil {
		return nil, err
	}
	keep := got[:0]
	for _, r := range got {
		if counted[r.ID] == r.Attempt {
			keep = append(keep, r)
		}
	}
	clear(got[len(keep):])
	return keep, nil
}
