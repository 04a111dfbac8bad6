package sqlqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
)

// statements are a subscription's finishing statements, rendered once at Open. Their
// arguments come in one order: the values they set, then the id, then (lease form) the token.
// The values set are, in this order, where the statement has them: the new retry_after (or the
// dead-letter group), the headers, the last error.
type statements struct {
	done       string          // ack and drop: delete, or set processed_at (then now comes first)
	doneMark   bool            // done sets processed_at
	doneMany   *sqltext.InList // lease: done for many ids sharing a token (token first, then ids)
	doneIDs    *sqltext.InList // row lock: done for many rows of one claim (now first when marking, then ids)
	release    string          // lease: clear the lease (abandon)
	unclaim    string          // lease: clear the lease and take back the attempt of a row never handed out
	uncharge   string          // lease: take back the attempt a rescue claim counted, in its transaction
	charge     string          // lease: count the attempt of a rescued row as its handler starts
	retry      string          // retry: lease cleared, attempt + 1 (row lock), last error; "" when the form writes nothing
	retryAfter string          // "" when the table has no retry_after column
	dlGroup    string          // group := dest
	dlNote     string          // dead-letter table: record headers and last error on the row before it moves
	dlCopy     string          // copy into the dead-letter table
	dlDelete   string          // then delete
	dlMove     string          // or move in one statement (Mover)
	hold       string          // hold back a row whose settlement failed: lease end or retry_after, last error
	extend     string          // lease: new token
	lockIDs    *sqltext.InList // lease with RowLocking: lock the free rows of many ids, skipping held ones
	waitIDs    *sqltext.InList // lease with RowLocking: lock rows, waiting (bounded) for held ones
	countSel   string          // row lock counting at claim: ready ids and their attempt + 1, locked, skipping held rows
	countB     *driver.Binder  // countSel's arguments
	countUpd   *sqltext.InList // row lock counting at claim: attempt + 1 (and the mark, where locked_until is) by ids
	lapsedSel  string          // row lock counting at claim: lapsed ids (marked, not held) and their attempt + 1, locked
	lapsedB    *driver.Binder  // lapsedSel's arguments
	untakeIDs  *sqltext.InList // row lock: clear the mark and take back the attempt of rows never handed out
	relock     *sqltext.InList // row lock counting at claim: the claimed rows again, ready, by ids, locked
	relockB    *driver.Binder  // relock's arguments before the ids
	takeStamp  string          // advisory: attempt + 1 on a ready row
	takeRead   string          // advisory: read the taken row
	candidates string          // advisory: ready rows and their keys
	candB      *driver.Binder  // advisory: candidates' arguments
	takeB      *driver.Binder  // advisory: takeStamp's arguments (slotID: the row's id)
	untake     string          // advisory: clear the mark and take back the attempt of a row never handed out
}

func (rt *runtime) render() error {
	rt.st = rt.renderStatements(false)
	if rt.count != countNever {
		// The row-lock settlements of a claim that counted its attempts count nothing more.
		rt.stCounted = rt.renderStatements(true)
	}
	s, d, f := rt.s, rt.d, rt.q.form
	switch {
	case rt.cfg.events[EventClaim] != nil:
	case f == FormLease:
		c, err := rt.q.lease.LeaseClaim(s)
		if err != nil {
			return fmt.Errorf("sqlqueue: %s lease claim for table %s: %w", d.Name(), rt.table, err)
		}
		rt.claim = c
		lapsed := *s
		lapsed.Lapsed = true
		if rt.rescue, err = rt.q.lease.LeaseClaim(&lapsed); err != nil {
			return fmt.Errorf("sqlqueue: %s lease rescue claim for table %s: %w", d.Name(), rt.table, err)
		}
		b := driver.NewBinder(d)
		// The look passes over rows another session holds locked (where the dialect can): a
		// row held past its lease end is no rescue's to take, and must not stop the claims.
		lock := ""
		if rt.rowLocks != nil {
			lock = rt.rowLocks.LockClause(true)
		}
		rt.lapsedProbe = "SELECT " + s.ID + " FROM " + s.ClaimFrom() + " WHERE " + lapsed.Ready(FormLease, b) + " ORDER BY " + s.Order() + " LIMIT 1" + lock
		rt.lapsedProbeB = b
	case f == FormRowLock:
		c, err := rt.q.rowLock.RowLockClaim(s)
		if err != nil {
			return fmt.Errorf("sqlqueue: %s row-lock claim for table %s: %w", d.Name(), rt.table, err)
		}
		rt.claim = c
	}
	return nil
}

// renderStatements renders the subscription's statements; counted: for row-lock deliveries
// whose attempt their claim counted already.
func (rt *runtime) renderStatements(counted bool) statements {
	s, d, f := rt.s, rt.d, rt.q.form
	p := d.Placeholder
	lease := f == FormLease
	var st statements
	n := 0
	next := func() string { n++; return p(n) }
	fence := func() string {
		w := " WHERE " + s.ID + " = " + next()
		if lease {
			w += " AND " + s.LockedUntil + " = " + next()
		}
		return w
	}
	// noteErr and noteHeaders set the last error and the dead letter's headers, where the
	// table has the columns.
	noteErr := func() string {
		if s.LastError == "" {
			return ""
		}
		return ", " + s.LastError + " = " + next()
	}
	noteHeaders := func() string {
		if s.Headers == "" {
			return ""
		}
		return ", " + s.Headers + " = " + next()
	}
	clearLease := ""
	if lease || (f == FormAdvisory && s.LockedUntil != "") || (f == FormRowLock && counted && s.LockedUntil != "") {
		// The advisory form marks a taken row in locked_until (advisory_rescue.go), the row-lock
		// form a row whose claim counted its attempt (rowlock_rescue.go): every settlement
		// clears the mark.
		clearLease = ", " + s.LockedUntil + " = NULL"
	}
	bump := ""
	if f == FormRowLock && s.Attempt != "" && !counted {
		bump = ", " + s.Attempt + " = " + s.Attempt + " + 1"
	}

	n = 0
	if s.ProcessedAt != "" {
		st.doneMark = true
		st.done = "UPDATE " + s.QTable + " SET " + s.ProcessedAt + " = " + next() + clearLease + fence()
		if lease {
			st.doneMany = sqltext.NewInList(d.Placeholder, driver.UpdateStart(d, s.QTable)+" SET "+s.ProcessedAt+" = "+p(1)+", "+s.LockedUntil+
				" = NULL WHERE "+s.LockedUntil+" = "+p(2)+" AND "+s.ID+" IN (", ")", 3)
		}
	} else {
		st.done = "DELETE FROM " + s.QTable + fence()
		if lease {
			st.doneMany = sqltext.NewInList(d.Placeholder, driver.DeleteStart(d, s.QTable)+" WHERE "+s.LockedUntil+" = "+p(1)+" AND "+s.ID+" IN (", ")", 2)
		}
	}
	if f == FormRowLock {
		if st.doneMark {
			st.doneIDs = sqltext.NewInList(d.Placeholder, driver.UpdateStart(d, s.QTable)+" SET "+s.ProcessedAt+" = "+p(1)+" WHERE "+s.ID+" IN (", ")", 2)
		} else {
			st.doneIDs = sqltext.NewInList(d.Placeholder, driver.DeleteStart(d, s.QTable)+" WHERE "+s.ID+" IN (", ")", 1)
		}
	}
	if lease {
		n = 0
		st.release = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = NULL" + fence()
		if s.Attempt != "" {
			n = 0
			st.unclaim = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = NULL, " + s.Attempt + " = " + s.Attempt + " - 1" + fence()
			n = 0
			st.uncharge = "UPDATE " + s.QTable + " SET " + s.Attempt + " = " + s.Attempt + " - 1" + fence()
			n = 0
			st.charge = "UPDATE " + s.QTable + " SET " + s.Attempt + " = " + s.Attempt + " + 1" + fence()
		}
		n = 0
		st.extend = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = " + next() + fence()
		if rl := rt.rowLocks; rl != nil {
			sel := "SELECT " + s.ID + " FROM " + s.QTable + " WHERE " + s.ID + " IN ("
			st.lockIDs = sqltext.NewInList(d.Placeholder, sel, ")"+rl.LockClause(true), 1)
			st.waitIDs = sqltext.NewInList(d.Placeholder, sel, ")"+rl.LockClause(false), 1)
		}
	}
	// A retry's statement: every SET is ", x = …"; the first comma goes.
	n = 0
	if set := clearLease + bump + noteErr(); set != "" {
		st.retry = "UPDATE " + s.QTable + " SET " + set[2:] + fence()
	}
	n = 0
	switch {
	case lease && s.RetryAfter != "":
		// The hold goes into retry_after and the lease is cleared: a row with a lease end in
		// the past is one whose claim lapsed without a settlement (lease_rescue.go), which a
		// row held back after a failed settlement is not.
		st.hold = "UPDATE " + s.QTable + " SET " + s.RetryAfter + " = " + next() + ", " + s.LockedUntil + " = NULL" + noteErr() + fence()
	case lease:
		// Without retry_after the hold is the lease end: once past, the row is taken as a
		// lapsed claim (alone), which costs only its neighbours' company.
		st.hold = "UPDATE " + s.QTable + " SET " + s.LockedUntil + " = " + next() + noteErr() + fence()
	case s.RetryAfter != "":
		st.hold = "UPDATE " + s.QTable + " SET " + s.RetryAfter + " = " + next() + clearLease + bump + noteErr() + fence()
	}
	if s.RetryAfter != "" {
		n = 0
		st.retryAfter = "UPDATE " + s.QTable + " SET " + s.RetryAfter + " = " + next() + clearLease + bump + noteErr() + fence()
	}
	if s.Group != "" {
		n = 0
		ra := ""
		if s.RetryAfter != "" {
			ra = ", " + s.RetryAfter + " = NULL"
		}
		st.dlGroup = "UPDATE " + s.QTable + " SET " + s.Group + " = " + next() + ra + clearLease + bump + noteHeaders() + noteErr() + fence()
	} else if rt.dlRef.Name != "" {
		n = 0
		if set := noteHeaders() + noteErr(); set != "" {
			st.dlNote = "UPDATE " + s.QTable + " SET " + set[2:] + fence()
		}
		to := driver.QuoteRef(d, rt.dlRef)
		var cols, exprs []string
		for _, c := range s.Table.ColumnList() {
			if c.Name == "" {
				continue
			}
			q := d.Quote(c.Name)
			e := q
			switch c.Role {
			case "locked_until", "retry_after", "processed_at":
				e = "NULL"
			case "attempt":
				if bump != "" {
					e = q + " + 1"
				}
			}
			cols, exprs = append(cols, q), append(exprs, e)
		}
		n = 0
		where := s.ID + " = " + next()
		if lease {
			where += " AND " + s.LockedUntil + " = " + next()
		}
		if m, ok := d.(Mover); ok {
			st.dlMove = m.MoveStatement(s.QTable, to, cols, exprs, where)
		} else {
			st.dlCopy = "INSERT INTO " + to + " (" + strings.Join(cols, ", ") + ") SELECT " + strings.Join(exprs, ", ") + " FROM " + s.QTable + " WHERE " + where
			st.dlDelete = "DELETE FROM " + s.QTable + " WHERE " + where
		}
	}
	if rt.count != countNever {
		lock := rt.rowLocks.LockClause(true)
		b := driver.NewBinder(d)
		st.countSel = "SELECT " + s.ID + ", " + s.Attempt + " + 1 FROM " + s.ClaimFrom() + " WHERE " + s.Ready(FormRowLock, b) +
			" ORDER BY " + s.Order() + " LIMIT " + b.Next(driver.ArgLimit) + lock
		st.countB = b
		// relock takes the rows count just counted (and marked): not by their mark.
		unmarked := *s
		unmarked.LockedUntil = ""
		if s.LockedUntil != "" {
			st.countUpd = sqltext.NewInList(d.Placeholder, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" + 1, "+s.LockedUntil+" = "+p(1)+" WHERE "+s.ID+" IN (", ")", 2)
			lapsed := *s
			lapsed.Lapsed = true
			lb := driver.NewBinder(d)
			st.lapsedSel = "SELECT " + s.ID + ", " + s.Attempt + " + 1 FROM " + s.ClaimFrom() + " WHERE " + lapsed.Ready(FormRowLock, lb) +
				" ORDER BY " + s.Order() + " LIMIT " + lb.Next(driver.ArgLimit) + lock
			st.lapsedB = lb
			st.untakeIDs = sqltext.NewInList(d.Placeholder, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" - 1, "+s.LockedUntil+" = NULL WHERE "+s.ID+" IN (", ")", 1)
		} else {
			st.countUpd = sqltext.NewInList(d.Placeholder, "UPDATE "+s.QTable+" SET "+s.Attempt+" = "+s.Attempt+" + 1 WHERE "+s.ID+" IN (", ")", 1)
		}
		rb := driver.NewBinder(d)
		st.relock = sqltext.NewInList(d.Placeholder, "SELECT "+s.Returned(s.Attempt)+" FROM "+s.ClaimFrom()+" WHERE "+unmarked.Ready(FormRowLock, rb)+
			" AND "+s.ID+" IN (", ") ORDER BY "+s.ID+lock, rb.Len()+1)
		st.relockB = rb
	}
	if f == FormAdvisory {
		ad := rt.q.adv
		key := s.ID
		if rt.cfg.advisoryKey != "" {
			key = "(" + rt.cfg.advisoryKey + ")"
		}
		b := driver.NewBinder(d)
		where := s.Ready(FormAdvisory, b)
		if af, ok := ad.(AdvisoryFilter); ok {
			where += " AND " + af.KeyFree(rt.keyPrefix(), ad.KeyText(key))
		}
		taken := "0"
		if s.LockedUntil != "" {
			taken = "CASE WHEN " + s.LockedUntil + " IS NULL THEN 0 ELSE 1 END"
		}
		st.candidates = "SELECT " + s.ID + ", " + ad.KeyText(key) + ", " + taken + " FROM " + s.QTable + " WHERE " + where +
			" ORDER BY " + s.Order() + " LIMIT " + b.Next(driver.ArgLimit)
		st.candB = b
		tb := driver.NewBinder(d)
		var set []string
		if s.Attempt != "" {
			set = append(set, s.Attempt+" = "+s.Attempt+" + 1")
		}
		if s.LockedUntil != "" {
			set = append(set, s.LockedUntil+" = "+tb.Next(driver.ArgNow)) // the mark of a taken row
		}
		if len(set) == 0 {
			set = append(set, s.ID+" = "+s.ID)
		}
		st.takeStamp = "UPDATE " + s.QTable + " SET " + strings.Join(set, ", ") + " WHERE " + s.ID + " = " + tb.Next(driver.ArgID) + " AND " + s.Ready(FormAdvisory, tb)
		st.takeB = tb
		if s.LockedUntil != "" {
			set := s.LockedUntil + " = NULL"
			if s.Attempt != "" {
				set += ", " + s.Attempt + " = " + s.Attempt + " - 1"
			}
			st.untake = "UPDATE " + s.QTable + " SET " + set + " WHERE " + s.ID + " = " + p(1)
		}
		att := "1"
		if s.Attempt != "" {
			att = s.Attempt
		}
		h := s.Headers
		if h == "" {
			h = "NULL"
		}
		st.takeRead = "SELECT " + s.Payload + ", " + att + ", " + h + ", " + orNull(s.CreatedAt) + " FROM " + s.QTable + " WHERE " + s.ID + " = " + p(1)
	}
	return st
}

// eventFor returns the custom event that replaces the statement of v, if any.
func (rt *runtime) eventFor(a core.Action) Event {
	switch a {
	case core.ActAck:
		return rt.cfg.events[EventAck]
	case core.ActDrop:
		return rt.cfg.events[EventDrop]
	case core.ActRetry:
		return rt.cfg.events[EventRetry]
	case core.ActRetryAfter:
		return rt.cfg.events[EventRetryAfter]
	case core.ActDeadLetter:
		return rt.cfg.events[EventDeadLetter]
	}
	return nil
}

// effective turns a RetryAfter on a table without a retry_after column into a Retry, with the
// warning the semantics call for.
func (rt *runtime) effective(d *delivery, v core.Verdict) core.Verdict {
	if v.Action == core.ActRetryAfter && rt.st.retryAfter == "" && rt.cfg.events[EventRetryAfter] == nil {
		rt.log.Warn("sqlqueue: retry_after on a table without a retry_after column; retrying now",
			"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "retry_after", v.Delay)
		v.Action, v.Delay = core.ActRetry, 0
	}
	return v
}

// needsTx reports whether finishing v takes more than one statement.
func (rt *runtime) needsTx(v core.Verdict) bool {
	return rt.eventFor(v.Action) != nil || (v.Action == core.ActDeadLetter && (rt.st.dlCopy != "" || rt.st.dlNote != ""))
}

// finish runs the finishing statement of v for d on q (a transaction when needsTx). It reports
// whether the row was still the delivery's (always true outside the lease form).
func (rt *runtime) finish(ctx context.Context, q Queryer, d *delivery, v core.Verdict, now time.Time) (bool, error) {
	if ev := rt.eventFor(v.Action); ev != nil {
		in := rt.eventInput(d, v, now)
		return rt.runEvent(ctx, q, ev, in)
	}
	lease := rt.q.form == FormLease
	st := rt.stFor(d)
	// The values a statement sets, then the id and (lease form) the token: a small array on
	// the stack holds them all.
	var buf [6]any
	a := buf[:0]
	fenced := func() []any {
		a = append(a, d.id)
		if lease {
			a = append(a, rt.d.Time(d.token))
		}
		return a
	}
	noteErr := func() {
		if rt.s.LastError != "" {
			a = append(a, core.Reason(v))
		}
	}
	var sql string
	switch v.Action {
	case core.ActAck, core.ActDrop:
		sql = st.done
		if st.doneMark {
			a = append(a, rt.d.Time(now))
		}
	case core.ActAbandon:
		if !lease {
			return true, nil
		}
		sql = st.release
	case core.ActRetry:
		if st.retry == "" {
			return true, nil
		}
		sql = st.retry
		noteErr()
	case core.ActRetryAfter:
		sql = st.retryAfter
		a = append(a, rt.d.Time(now.Add(v.Delay).Truncate(time.Microsecond)))
		noteErr()
	case core.ActDeadLetter:
		if v.Dest != rt.sub.Options.DeadLetterTo {
			return false, fmt.Errorf("%w: %q", errNotOwnDest, v.Dest)
		}
		if st.dlGroup != "" {
			sql = st.dlGroup
			a = append(a, v.Dest)
			rt.noteDead(&a, d, v, now)
			break
		}
		if st.dlNote != "" {
			rt.noteDead(&a, d, v, now)
			r, err := q.Exec(ctx, st.dlNote, fenced()...)
			if err != nil || r.RowsAffected == 0 {
				return false, err
			}
			a = a[:0]
		}
		if st.dlMove != "" {
			sql = st.dlMove
			break
		}
		r, err := q.Exec(ctx, st.dlCopy, fenced()...)
		if err != nil || r.RowsAffected == 0 {
			return false, err
		}
		a = a[:0]
		sql = st.dlDelete
	default:
		return false, fmt.Errorf("sqlqueue: unknown action %v", v.Action)
	}
	r, err := q.Exec(ctx, sql, fenced()...)
	if err != nil {
		return false, err
	}
	return r.RowsAffected > 0, nil
}

// noteDead appends the values a dead letter records on its row, where the table has the
// columns: its headers with core's dead-letter headers merged in, and the last error.
func (rt *runtime) noteDead(a *[]any, d *delivery, v core.Verdict, now time.Time) {
	if rt.s.Headers != "" {
		*a = append(*a, rt.deadHeaders(d, v, now))
	}
	if rt.s.LastError != "" {
		*a = append(*a, core.Reason(v))
	}
}

// deadHeaders returns the headers column of a dead letter: the row's own headers with the
// dead-letter headers (count, origin, time, reason) set. Headers that are not a JSON object of
// strings are written back as they were rather than replaced: nothing of the row is lost.
func (rt *runtime) deadHeaders(d *delivery, v core.Verdict, now time.Time) any {
	h := map[string]string{}
	if len(d.headers) > 0 && string(d.headers) != "null" {
		if err := json.Unmarshal(d.headers, &h); err != nil {
			rt.log.Warn("sqlqueue: the headers column does not hold a JSON object of strings; the dead letter keeps it as it was, without the dead-letter headers",
				"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
			return string(d.headers)
		}
	}
	core.NewDeadLetterInfo(d, v, rt.q.name, now).AddTo(h)
	b, err := json.Marshal(h)
	if err != nil { // a map of strings always marshals
		return string(d.headers)
	}
	return string(b)
}

func (rt *runtime) eventInput(d *delivery, v core.Verdict, now time.Time) EventInput {
	in := EventInput{Form: rt.q.form, Dialect: string(FamilyOf(rt.d)), Queue: rt.q.name, Table: rt.s.Table.Ref(),
		Group: rt.q.group, Now: now, ID: d.id, Attempt: d.attempt, Token: d.token, Dest: v.Dest}
	switch v.Action {
	case core.ActAck:
		in.Kind = EventAck
	case core.ActDrop:
		in.Kind = EventDrop
	case core.ActRetry:
		in.Kind = EventRetry
	case core.ActRetryAfter:
		in.Kind = EventRetryAfter
		in.RetryAfter = now.Add(v.Delay).Truncate(time.Microsecond)
	case core.ActDeadLetter:
		in.Kind = EventDeadLetter
	}
	if in.Kind != EventAck && in.Kind != EventDrop {
		in.Reason = core.Reason(v)
	}
	return in
}

// runEvent runs a custom event's statements on q; it reports whether they changed any row.
func (rt *runtime) runEvent(ctx context.Context, q Queryer, ev Event, in EventInput) (bool, error) {
	stmts, err := ev(ctx, in)
	if err != nil {
		return false, fmt.Errorf("sqlqueue: custom %v event: %w", in.Kind, err)
	}
	var changed int64
	for _, s := range stmts {
		r, err := q.Exec(ctx, s.SQL, rt.args(s.Args)...)
		if err != nil {
			return false, fmt.Errorf("sqlqueue: custom %v event: %w", in.Kind, s.wrap(err))
		}
		changed += r.RowsAffected
	}
	return changed > 0 || rt.q.form != FormLease, nil
}

// args converts time.Time arguments with the dialect.
func (rt *runtime) args(a []any) []any {
	out := a
	for i, x := range a {
		if t, ok := x.(time.Time); ok {
			if &out[0] == &a[0] {
				out = append([]any(nil), a...)
			}
			out[i] = rt.d.Time(t.UTC().Truncate(time.Microsecond))
		}
	}
	return out
}

// customClaim runs the EventClaim statements in tx; the last returns the rows.
func (rt *runtime) customClaim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	in := EventInput{Kind: EventClaim, Form: rt.q.form, Dialect: string(FamilyOf(rt.d)), Queue: rt.q.name, Table: rt.s.Table.Ref(),
		Group: rt.q.group, Now: p.Now, Token: p.Token, Limit: p.Limit}
	stmts, err := rt.cfg.events[EventClaim](ctx, in)
	if err != nil {
		return dst, fmt.Errorf("sqlqueue: custom claim event: %w", err)
	}
	if len(stmts) == 0 {
		return dst, fmt.Errorf("sqlqueue: custom claim event returned no statement")
	}
	for _, s := range stmts[:len(stmts)-1] {
		if _, err := tx.Exec(ctx, s.SQL, rt.args(s.Args)...); err != nil {
			return dst, fmt.Errorf("sqlqueue: custom claim event: %w", s.wrap(err))
		}
	}
	last := stmts[len(stmts)-1]
	rows, err := tx.Query(ctx, last.SQL, rt.args(last.Args)...)
	if err != nil {
		return dst, fmt.Errorf("sqlqueue: custom claim event: %w", last.wrap(err))
	}
	dst, err = driver.ScanClaimed(rt.d, rows, dst, false) // a custom claim returns no created_at
	if err != nil {
		err = last.wrap(err)
	}
	return dst, err
}

// doClaim runs the claim (the dialect's or the custom one).
func (rt *runtime) doClaim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	if rt.cfg.events[EventClaim] != nil {
		return rt.customClaim(ctx, tx, p, dst)
	}
	return rt.claim.Claim(ctx, tx, p, dst)
}

// orNull is col, or NULL for a column the table does not have.
func orNull(col string) string {
	if col == "" {
		return "NULL"
	}
	return col
}
