package rowlock

import (
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
)

// countMode is when a row-lock claim counts attempts at claim.
type countMode uint8

const (
	countNever  countMode = iota // in the settling statement, inside the claim's transaction
	countRamp                    // at claim while the claim size is below BatchSize (CountAtClaim's default)
	countAlways                  // at every claim (CountAtClaim(true))
)

// statements are the row-lock form's statements, rendered once when a subscription opens.
type statements struct {
	// settle are the settlements of a claim that did not count its attempts: they count it;
	// counted those of a claim that did (nil when no claim counts), which count nothing more and
	// clear the count's mark.
	settle, counted *engine.Settlements
	claim           driver.Claim    // the dialect's row-lock claim (nil with a custom claim event)
	doneIDs         *sqltext.InList // done for many rows of one claim (now first when marking, then ids)
	grouped         groupedSQL      // how the dialect settles a claim's acks and drops at once
	count           countMode       // when the claims count attempts

	// Counting at claim (count.go): the rows count takes, their count (and mark), the lapsed
	// ones, the given-back ones, and the claim's relock of what it counted.
	countSel  string // ready ids and their attempt + 1, locked, skipping held rows
	countB    *driver.Binder
	countUpd  *sqltext.InList // attempt + 1 (and the mark, where locked_until is) by ids
	lapsedSel string          // lapsed ids (marked, not held) and their attempt + 1, locked
	lapsedB   *driver.Binder
	untakeIDs *sqltext.InList // clear the mark and take back the attempt of rows never handed out
	relock    *sqltext.InList // the claimed rows again, ready, by ids, locked
	relockB   *driver.Binder  // relock's arguments before the ids
}

// groupedSQL is how a claim's plain acks and drops settle with one statement at its commit: the
// dialect's statement by ids (GroupedRowLockSQL), or with the ids as one array
// (GroupedRowLockArray), or the engine's IN-list (doneIDs).
type groupedSQL struct {
	on      bool                     // the dialect settles a claim's acks and drops with one statement
	byIDs   driver.GroupedRowLockSQL // the dialect spells that statement (nil: doneIDs) …
	byCount sqltext.ByCount          // … once per number of ids
	byArray string                   // or spells it with the ids as one array
}

// shape is how a row-lock claim holds its rows for the settlements: counted says whether the
// claim counted their attempts (and marked them in locked_until, where the table has it).
func shape(s *driver.Schema, counted bool) engine.Shape {
	if counted {
		return engine.Shape{Clear: s.LockedUntil}
	}
	return engine.Shape{Count: true}
}

// render renders the row-lock form's statements for rt with dialect d's claim; count is when
// its claims count attempts.
func render(rt *engine.Runtime, d driver.RowLockDialect, count countMode) (*statements, error) {
	s := rt.S
	st := &statements{settle: engine.RenderSettlements(rt, shape(s, false)), count: count}
	if count != countNever {
		// The row-lock settlements of a claim that counted its attempts count nothing more.
		st.counted = engine.RenderSettlements(rt, shape(s, true))
		st.renderCount(rt)
	}
	if rt.Cfg.Events[engine.EventClaim] == nil {
		c, err := d.RowLockClaim(s)
		if err != nil {
			return nil, fmt.Errorf("sqlqueue: %s row-lock claim for table %s: %w", d.Name(), rt.Table, err)
		}
		st.claim = c
	}
	ph := rt.D.Placeholder
	if st.settle.DoneMark {
		st.doneIDs = sqltext.NewInList(ph, driver.UpdateStart(rt.D, s.QTable)+" SET "+s.ProcessedAt+" = "+ph(1)+" WHERE "+s.ID+" IN (", ")", 2)
	} else {
		st.doneIDs = sqltext.NewInList(ph, driver.DeleteStart(rt.D, s.QTable)+" WHERE "+s.ID+" IN (", ")", 1)
	}
	st.renderGrouped(rt)
	return st, nil
}

// renderGrouped picks how a claim's acks and drops settle at its commit.
func (st *statements) renderGrouped(rt *engine.Runtime) {
	g, ok := rt.D.(driver.GroupedRowLock)
	st.grouped.on = ok && g.GroupRowLockSettlements()
	if !st.grouped.on {
		return
	}
	if ga, ok := rt.D.(driver.GroupedRowLockArray); ok {
		mark := ""
		if st.settle.DoneMark {
			mark = rt.S.ProcessedAt
		}
		st.grouped.byArray = ga.SettleByIDArray(rt.S.QTable, rt.S.ID, mark)
	}
	if gs, ok := rt.D.(driver.GroupedRowLockSQL); ok && st.grouped.byArray == "" {
		st.grouped.byIDs = gs
	}
}

// renderCount renders the statements of counting at claim (count.go).
func (st *statements) renderCount(rt *engine.Runtime) {
	s, d := rt.S, rt.D
	ph := d.Placeholder
	lock := rt.RowLocks.LockClause(true)
	b := driver.NewBinder(d)
	st.countSel = "SELECT " + s.ID + ", " + s.Attempt + " + 1 FROM " + s.ClaimFrom() + " WHERE " + s.Ready(driver.FormRowLock, b) +
		" ORDER BY " + s.Order() + " LIMIT " + b.Next(driver.ArgLimit) + lock
	st.countB = b
	if s.LockedUntil != "" {
		st.countUpd = sqltext.NewInList(ph, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" + 1, "+s.LockedUntil+" = "+ph(1)+" WHERE "+s.ID+" IN (", ")", 2)
		lapsed := *s
		lapsed.Lapsed = true
		lb := driver.NewBinder(d)
		st.lapsedSel = "SELECT " + s.ID + ", " + s.Attempt + " + 1 FROM " + s.ClaimFrom() + " WHERE " + lapsed.Ready(driver.FormRowLock, lb) +
			" ORDER BY " + s.Order() + " LIMIT " + lb.Next(driver.ArgLimit) + lock
		st.lapsedB = lb
		st.untakeIDs = sqltext.NewInList(ph, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" - 1, "+s.LockedUntil+" = NULL WHERE "+s.ID+" IN (", ")", 1)
	} else {
		st.countUpd = sqltext.NewInList(ph, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" + 1 WHERE "+s.ID+" IN (", ")", 1)
	}
	// relock takes the rows count just counted (and marked): not by their mark.
	unmarked := *s
	unmarked.LockedUntil = ""
	rb := driver.NewBinder(d)
	st.relock = sqltext.NewInList(ph, "SELECT "+s.Returned(s.Attempt)+" FROM "+s.ClaimFrom()+" WHERE "+unmarked.Ready(driver.FormRowLock, rb)+
		" AND "+s.ID+" IN (", ") ORDER BY "+s.ID+lock, rb.Len()+1)
	st.relockB = rb
}

// settlements returns the settlements of a delivery whose claim counted its attempt or not.
func (st *statements) settlements(counted bool) *engine.Settlements {
	if counted {
		return st.counted
	}
	return st.settle
}

// named lists the statements as golden files name them: in-lists at engine.InList rows.
func (st *statements) named(rt *engine.Runtime) ([]engine.Named, error) {
	list, err := rt.ClaimStatements("claim", st.claim)
	if err != nil {
		return nil, err
	}
	list = append(list, st.settle.Named("")...)
	list = engine.Add(list, "doneIDs", st.doneIDs.SQL(engine.InList), nil)
	if st.counted != nil {
		list = append(list, st.counted.Named("counted.")...)
		list = engine.Add(list, "countSel", st.countSel, st.countB)
		list = engine.Add(list, "countUpd", st.countUpd.SQL(engine.InList), nil)
		list = engine.Add(list, "lapsedSel", st.lapsedSel, st.lapsedB)
		if st.untakeIDs != nil {
			list = engine.Add(list, "untakeIDs", st.untakeIDs.SQL(engine.InList), nil)
		}
		list = engine.Add(list, "relock", st.relock.SQL(engine.InList), st.relockB)
	}
	if st.grouped.on {
		sql := st.grouped.byArray
		switch {
		case sql != "":
		case st.grouped.byIDs != nil:
			sql = st.grouped.byIDs.SettleByIDs(rt.S.QTable, rt.S.ID, rt.S.ProcessedAt, engine.InList)
		default:
			sql = st.doneIDs.SQL(engine.InList)
		}
		list = engine.Add(list, "grouped", sql, nil)
	}
	return list, nil
}
