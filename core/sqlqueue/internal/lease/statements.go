package lease

import (
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
)

// statements are the lease form's statements, rendered once when a subscription opens: the
// settlements every form shares, fenced by the token (locked_until), and the lease's own.
type statements struct {
	*engine.Settlements
	claim  driver.Claim // the dialect's lease claim (nil with a custom claim event)
	rescue driver.Claim // the claim of a lapsed row (lapsed rows: rescue.go); nil with a custom claim
	// probe looks whether there is a lapsed row, bound by probeB; "" with a custom claim.
	probe  string
	probeB *driver.Binder

	doneMany *sqltext.InList // done for many ids sharing a token (token first, then ids)
	release  string          // clear the lease (abandon)
	unclaim  string          // clear the lease and take back the attempt of a row never handed out
	uncharge string          // take back the attempt a rescue claim counted, in its transaction
	charge   string          // count the attempt of a rescued row as its handler starts
	extend   string          // new token
	lockIDs  *sqltext.InList // with RowLocking: lock the free rows of many ids, skipping held ones
	waitIDs  *sqltext.InList // with RowLocking: lock rows, waiting (bounded) for held ones
}

// shape is how the lease form holds a row: the token in locked_until fences every statement,
// every settlement clears it, and without retry_after a failed settlement's hold moves it.
func shape(s *driver.Schema) engine.Shape {
	return engine.Shape{Fence: s.LockedUntil, Clear: s.LockedUntil, HoldAt: s.LockedUntil}
}

// render renders the lease form's statements for rt with dialect d's claims.
func render(rt *engine.Runtime, d driver.LeaseDialect) (*statements, error) {
	s := rt.S
	st := &statements{Settlements: engine.RenderSettlements(rt, shape(s))}
	if err := st.renderClaims(rt, d); err != nil {
		return nil, err
	}
	ph := rt.D.Placeholder
	fence := " WHERE " + s.ID + " = " + ph(1) + " AND " + s.LockedUntil + " = " + ph(2)
	if st.DoneMark {
		st.doneMany = sqltext.NewInList(ph, driver.UpdateStart(rt.D, s.QTable)+" SET "+s.ProcessedAt+" = "+ph(1)+", "+s.LockedUntil+
			" = NULL WHERE "+s.LockedUntil+" = "+ph(2)+" AND "+s.ID+" IN (", ")", 3)
	} else {
		st.doneMany = sqltext.NewInList(ph, driver.DeleteStart(rt.D, s.QTable)+" WHERE "+s.LockedUntil+" = "+ph(1)+" AND "+s.ID+" IN (", ")", 2)
	}
	st.release = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = NULL" + fence
	if s.Attempt != "" {
		st.unclaim = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = NULL, " + s.Attempt + " = " + s.Attempt + " - 1" + fence
		st.uncharge = "UPDATE " + s.QTable + " SET " + s.Attempt + " = " + s.Attempt + " - 1" + fence
		st.charge = "UPDATE " + s.QTable + " SET " + s.Attempt + " = " + s.Attempt + " + 1" + fence
	}
	st.extend = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = " + ph(1) + " WHERE " + s.ID + " = " + ph(2) + " AND " + s.LockedUntil + " = " + ph(3)
	if rl := rt.RowLocks; rl != nil {
		sel := "SELECT " + s.ID + " FROM " + s.QTable + " WHERE " + s.ID + " IN ("
		st.lockIDs = sqltext.NewInList(ph, sel, ")"+rl.LockClause(true), 1)
		st.waitIDs = sqltext.NewInList(ph, sel, ")"+rl.LockClause(false), 1)
	}
	return st, nil
}

// renderClaims renders the claim, the rescue claim of a lapsed row and the look for one; a
// custom claim event replaces all three.
func (st *statements) renderClaims(rt *engine.Runtime, d driver.LeaseDialect) error {
	if rt.Cfg.Events[engine.EventClaim] != nil {
		return nil
	}
	s := rt.S
	c, err := d.LeaseClaim(s)
	if err != nil {
		return fmt.Errorf("sqlqueue: %s lease claim for table %s: %w", d.Name(), rt.Table, err)
	}
	st.claim = c
	lapsed := *s
	lapsed.Lapsed = true
	if st.rescue, err = d.LeaseClaim(&lapsed); err != nil {
		return fmt.Errorf("sqlqueue: %s lease rescue claim for table %s: %w", d.Name(), rt.Table, err)
	}
	b := driver.NewBinder(rt.D)
	// The look passes over rows another session holds locked (where the dialect can): a row
	// held past its lease end is no rescue's to take, and must not stop the claims.
	lock := ""
	if rt.RowLocks != nil {
		lock = rt.RowLocks.LockClause(true)
	}
	st.probe = "SELECT " + s.ID + " FROM " + s.ClaimFrom() + " WHERE " + lapsed.Ready(driver.FormLease, b) + " ORDER BY " + s.Order() + " LIMIT 1" + lock
	st.probeB = b
	return nil
}

// named lists the statements as golden files name them: in-lists at engine.InList rows.
func (st *statements) named(rt *engine.Runtime) ([]engine.Named, error) {
	claim, err := rt.ClaimStatements("claim", st.claim)
	if err != nil {
		return nil, err
	}
	rescue, err := rt.ClaimStatements("rescue", st.rescue)
	if err != nil {
		return nil, err
	}
	list := append(claim, rescue...)
	list = engine.Add(list, "lapsedProbe", st.probe, st.probeB)
	list = append(list, st.Settlements.Named("")...)
	list = engine.Add(list, "doneMany", st.doneMany.SQL(engine.InList), nil)
	for _, s := range []struct{ name, sql string }{
		{"release", st.release}, {"unclaim", st.unclaim}, {"uncharge", st.uncharge}, {"charge", st.charge}, {"extend", st.extend},
	} {
		list = engine.Add(list, s.name, s.sql, nil)
	}
	if st.lockIDs != nil {
		list = engine.Add(list, "lockIDs", st.lockIDs.SQL(engine.InList), nil)
		list = engine.Add(list, "waitIDs", st.waitIDs.SQL(engine.InList), nil)
	}
	return list, nil
}
