package sqlqueuetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// shape is a table shape of the outcome matrix.
type shape struct {
	name string
	// table returns the table description under name.
	table func(name string) sqlqueue.Table
	// dead is the dead-letter destination: a group, or a table for shapes without a group.
	dead string
}

func (s shape) has(tb sqlqueue.Table) (group, attempt, retryAfter, processed, headers bool) {
	c := tb.Columns
	return c.Group != "", c.Attempt != "", c.RetryAfter != "", c.ProcessedAt != "", c.Headers != ""
}

// errDeclined is the cause the matrix's failing outcomes give.
var errDeclined = errors.New("card declined")

// Shapes are the table shapes of the outcome matrix: every column (ack marks processed_at,
// dead letter is a group), no processed_at (ack deletes), no group (dead letter is a table),
// and the bare minimum (no attempt, no retry_after: no cap, RetryAfter acts as Retry).
// The standard and ungrouped shapes also record the last error (Columns.LastError).
var shapes = []shape{
	{name: "standard", table: func(n string) sqlqueue.Table {
		t := sqlqueue.StandardTable(n)
		t.Columns.LastError = "last_error"
		return t
	}, dead: "q.dead"},
	{name: "deleting", table: func(n string) sqlqueue.Table {
		t := sqlqueue.StandardTable(n)
		t.Columns.ProcessedAt = ""
		return t
	}, dead: "q.dead"},
	{name: "ungrouped", table: func(n string) sqlqueue.Table {
		t := sqlqueue.StandardTable(n)
		t.Columns.Group, t.Columns.ProcessedAt = "", ""
		t.Columns.LastError = "last_error"
		return t
	}, dead: "q_dead"},
	{name: "bare", table: func(n string) sqlqueue.Table {
		return sqlqueue.Table{Name: n, Columns: sqlqueue.Columns{ID: "id", Payload: "payload", LockedUntil: "locked_until"}}
	}},
}

// outcome is a handler outcome of the matrix.
type outcome struct {
	name string
	ret  error
	dead bool // mounted with DeadLetterAfter(1, …): the retry becomes a dead letter
}

var delay = time.Minute

var outcomes = []outcome{
	{name: "ack"},
	{name: "drop", ret: core.Drop()},
	{name: "retry", ret: core.Retry().Because(errDeclined)},
	{name: "retry_after", ret: core.RetryAfter(delay).Because(errDeclined)},
	{name: "dead_letter", ret: core.Retry().Because(errDeclined), dead: true},
}

// RunOutcomes runs every outcome in every form over every table shape, transactional mode off
// and on, and asserts the rows each leaves.
func RunOutcomes(t *testing.T, open Open) {
	probe := open(t)
	for _, fm := range forms(probe) {
		t.Run(fm.name, func(t *testing.T) {
			for _, sh := range shapes {
				t.Run(sh.name, func(t *testing.T) {
					for _, oc := range outcomes {
						if oc.dead && sh.table("q").Columns.Attempt == "" {
							continue // a cap needs an attempt column; its refusal is a BadInput case
						}
						for _, tx := range []bool{false, true} {
							name := oc.name
							if tx {
								name += "/tx"
							}
							t.Run(name, func(t *testing.T) {
								t.Parallel()
								outcomeCase(t, open(t), fm.f, sh, oc, tx)
							})
						}
					}
				})
			}
			t.Run("custom_ack", func(t *testing.T) { t.Parallel(); customCase(t, open(t), fm.f) })
			t.Run("custom_ack_failure_isolated", func(t *testing.T) { t.Parallel(); customFailureCase(t, open(t), fm.f) })
			t.Run("settlement_fails", func(t *testing.T) { t.Parallel(); settlementFails(t, open(t), fm.f) })
			if fm.f != sqlqueue.FormAdvisory {
				t.Run("custom_claim", func(t *testing.T) { t.Parallel(); customClaim(t, open(t), fm.f) })
			}
		})
	}
}

func formOf(f *Fixture, which sqlqueue.Form) form {
	for _, fm := range forms(f) {
		if fm.f == which {
			return fm
		}
	}
	panic("form not offered")
}

func outcomeCase(t *testing.T, f *Fixture, which sqlqueue.Form, sh shape, oc outcome, tx bool) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sh.table("q")
	group, hasAttempt, hasRA, processed, headers := sh.has(tb)
	e.create(tb)
	var dlTable sqlqueue.Table
	if oc.dead && !group {
		dlTable = sh.table(sh.dead)
		e.create(dlTable)
	}
	if tx {
		e.createSide()
	}
	g := ""
	if group {
		g = "q"
	}
	pub := e.publisher(tb, g)
	var popts []sqlqueue.PublishOption
	if headers {
		popts = append(popts, sqlqueue.WithHeaders(map[string]string{"trace": "t-1"}))
	}
	id := e.publish(pub, Refund{Card: "c-1", Amount: 5}, popts...)

	a := e.app(nil)
	var opts []core.Option
	if oc.dead {
		opts = append(opts, core.DeadLetterAfter(1, sh.dead))
	}
	if tx {
		opts = append(opts, sqlqueue.Transactional())
	}
	seen := make(chan *core.Message[Refund], 1)
	release := make(chan struct{})
	subscribe(e, a, e.endpoint(fm, tb, g), func(ctx context.Context, m *core.Message[Refund]) error {
		if tx {
			if err := writeSide(ctx, f.Dialect, "side"); err != nil {
				return fmt.Errorf("writing through the delivery's transaction: %w", err)
			}
		}
		select {
		case seen <- m:
		default:
			return fmt.Errorf("delivered again (attempt %d) while the App was stopping", m.Attempt())
		}
		<-release
		return oc.ret
	}, opts...)
	stop := e.run(a)
	m := waitFor(t, seen, "the handler")
	e.stopWhileHandling(stop, release)
	settled := e.rec.WaitSettled(1)

	if m.Attempt() != 1 {
		t.Errorf("first delivery: Attempt() = %d; want 1", m.Attempt())
	}
	if m.Payload.Card != "c-1" {
		t.Errorf("payload = %+v", m.Payload)
	}
	if headers && m.Headers()["trace"] != "t-1" {
		t.Errorf("headers = %v; want trace=t-1", m.Headers())
	}
	if err := settled[0].Err; err != nil {
		t.Fatalf("settlement failed: %v", err)
	}
	if tx {
		want := 0
		if oc.name == "ack" {
			want = 1
		}
		if n := e.count(sideTable); n != want {
			t.Errorf("side rows written through the delivery's transaction: %d; want %d (ack commits them, every other outcome rolls them back)", n, want)
		}
	}

	rows := e.rows(tb)
	now := Epoch
	// what a failed attempt records in last_error, where the table has it
	lastError := ""
	if oc.ret != nil && oc.name != "drop" {
		lastError = core.Reason(settled[0].Verdict)
		if !strings.Contains(lastError, errDeclined.Error()) {
			t.Errorf("the verdict's reason %q does not carry the handler's cause", lastError)
		}
	}
	checkLastError := func(r *Row) {
		t.Helper()
		if tb.Columns.LastError != "" && r.LastError != lastError {
			t.Errorf("last_error = %q; want %q", r.LastError, lastError)
		}
	}
	// attempts as each form counts them after one delivery
	counted := 1
	if which == sqlqueue.FormRowLock {
		counted = 0 // counted by the statement that returns the row
	}
	one := func() *Row {
		t.Helper()
		if len(rows) != 1 {
			t.Fatalf("table holds %d rows; want 1: %+v", len(rows), rows)
		}
		r := &rows[0]
		if r.ID != id {
			t.Errorf("row id = %d; want %d", r.ID, id)
		}
		e.isNull("locked_until", r.LockedUntil)
		return r
	}
	switch oc.name {
	case "ack", "drop":
		if !processed {
			if len(rows) != 0 {
				t.Errorf("%s should delete the row; table holds %+v", oc.name, rows)
			}
			return
		}
		r := one()
		checkLastError(r)
		e.timeIs("processed_at", r.ProcessedAt, now)
		if hasAttempt && r.Attempt != counted {
			t.Errorf("attempt = %d; want %d", r.Attempt, counted)
		}
	case "retry", "retry_after":
		r := one()
		checkLastError(r)
		if r.ProcessedAt != nil {
			t.Errorf("processed_at set on a retried row")
		}
		if hasAttempt && r.Attempt != 1 {
			t.Errorf("attempt = %d; want 1", r.Attempt)
		}
		if group && r.Group != "q" {
			t.Errorf("group = %q; want q", r.Group)
		}
		if oc.name == "retry_after" && hasRA {
			e.timeIs("retry_after", r.RetryAfter, now.Add(delay))
		} else if hasRA {
			e.isNull("retry_after", r.RetryAfter)
		}
		if oc.name == "retry_after" && !hasRA {
			found := false
			for _, l := range e.logs.Records(0) {
				if strings.Contains(l.Message, "without a retry_after column") && l.Attrs["message_id"] == fmt.Sprint(id) && l.Attrs["attempt"] == int64(1) {
					found = true
				}
			}
			if !found {
				t.Errorf("no warning with message_id and attempt for retry_after on a table without retry_after")
			}
		}
	case "dead_letter":
		if group {
			r := one()
			checkLastError(r)
			e.deadLetterHeaders(r, headers, "q", 1, now, lastError)
			if r.Group != sh.dead {
				t.Errorf("group = %q; want the dead-letter group %q", r.Group, sh.dead)
			}
			if r.Attempt != 1 {
				t.Errorf("attempt = %d; want 1 (the final count)", r.Attempt)
			}
			if hasRA {
				e.isNull("retry_after", r.RetryAfter)
			}
			return
		}
		if len(rows) != 0 {
			t.Errorf("the row should have moved out; table holds %+v", rows)
		}
		dl := e.rows(dlTable)
		if len(dl) != 1 {
			t.Fatalf("dead-letter table holds %d rows; want 1", len(dl))
		}
		if dl[0].ID != id || dl[0].Attempt != 1 || !strings.Contains(string(dl[0].Payload), "c-1") {
			t.Errorf("dead-letter row = id %d attempt %d payload %s; want id %d attempt 1 and the payload", dl[0].ID, dl[0].Attempt, dl[0].Payload, id)
		}
		e.isNull("dead-letter locked_until", dl[0].LockedUntil)
		checkLastError(&dl[0])
		e.deadLetterHeaders(&dl[0], headers, "q", 1, now, lastError)
	}
}

// deadLetterHeaders checks that a dead letter's headers column (where the table has one) keeps
// the row's own headers and says why it died: count, origin queue, time and reason.
func (e *env) deadLetterHeaders(r *Row, has bool, origin string, count int, at time.Time, reason string) {
	e.t.Helper()
	if !has {
		return
	}
	var h map[string]string
	if err := json.Unmarshal(r.Headers, &h); err != nil {
		e.t.Errorf("dead letter's headers %s: %v", r.Headers, err)
		return
	}
	if h["trace"] != "t-1" {
		e.t.Errorf("dead letter's headers %v lost the row's own trace=t-1", h)
	}
	info, ok, err := core.ParseDeadLetterInfo(h)
	if !ok || err != nil {
		e.t.Errorf("dead letter's headers %v: no dead-letter info (ok=%v, err=%v)", h, ok, err)
		return
	}
	if info.Count != count || info.Origin != origin || !info.At.Equal(at) || info.Error != reason {
		e.t.Errorf("dead-letter info = %+v; want count %d, origin %q, at %v, error %q", info, count, origin, at, reason)
	}
}

// customCase replaces the ack statement with the service's own SQL.
func customCase(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	fm := formOf(f, which)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	id := e.publish(e.publisher(tb, "q"), Refund{Card: "c"})
	d := f.Dialect
	ev := func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		if in.Kind != sqlqueue.EventAck || in.ID != id || in.Attempt != 1 {
			return nil, fmt.Errorf("unexpected input %+v", in)
		}
		q := "UPDATE " + d.Quote("q") + " SET " + d.Quote("grp") + " = " + d.Placeholder(1) + ", " + d.Quote("locked_until") +
			" = NULL WHERE " + d.Quote("id") + " = " + d.Placeholder(2)
		args := []any{"archived", in.ID}
		if in.Form == sqlqueue.FormLease {
			q += " AND " + d.Quote("locked_until") + " = " + d.Placeholder(3)
			args = append(args, in.Token)
		}
		return []sqlqueue.Statement{{SQL: q, Args: args}}, nil
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(fm, tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error { return nil },
		sqlqueue.OnEvent(sqlqueue.EventAck, ev))
	stop := e.run(a)
	s := e.rec.WaitSettled(1)
	stop()
	if s[0].Err != nil {
		t.Fatalf("custom ack failed: %v", s[0].Err)
	}
	rows := e.rows(tb)
	if len(rows) != 1 || rows[0].Group != "archived" || rows[0].ProcessedAt != nil {
		t.Errorf("rows = %+v; want the row moved to group archived by the custom ack, not marked processed", rows)
	}
}

// customFailureCase: a custom ack whose SQL fails for one row of a claim fails that row's
// settlement alone; the other rows of the same claim are settled, and the failed row is left
// as it was (in the row-lock form, behind a savepoint in the claim's transaction).
func customFailureCase(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	ids := []int64{e.publish(p, Refund{Card: "a"}), e.publish(p, Refund{Card: "poison"}), e.publish(p, Refund{Card: "c"})}
	poison := ids[1]
	d := f.Dialect
	ev := func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		table := d.Quote("q")
		if in.ID == poison {
			table = d.Quote("no_such_table") // the service's SQL is wrong for this row
		}
		q := "UPDATE " + table + " SET " + d.Quote("grp") + " = " + d.Placeholder(1) + ", " + d.Quote("locked_until") +
			" = NULL WHERE " + d.Quote("id") + " = " + d.Placeholder(2)
		args := []any{"archived", in.ID}
		if in.Form == sqlqueue.FormLease {
			q += " AND " + d.Quote("locked_until") + " = " + d.Placeholder(3)
			args = append(args, in.Token)
		}
		return []sqlqueue.Statement{{SQL: q, Args: args}}, nil
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error { return nil },
		// Three workers: an advisory claimant retakes a row whose settlement failed at once, and
		// with one worker that row would keep the next one waiting.
		sqlqueue.OnEvent(sqlqueue.EventAck, ev), sqlqueue.BatchSize(3), core.Workers(3))
	stop := e.run(a)
	e.rec.WaitFor(func(all []core.Settlement) bool {
		done := map[string]bool{}
		failed := false
		for _, s := range all {
			if s.Err == nil {
				done[s.Delivery.ID()] = true
			} else if s.Delivery.ID() == fmt.Sprint(poison) {
				failed = true
			}
		}
		return failed && done[fmt.Sprint(ids[0])] && done[fmt.Sprint(ids[2])]
	})
	stop()
	for _, s := range e.rec.Settlements() {
		if s.Err != nil && s.Delivery.ID() != fmt.Sprint(poison) {
			t.Errorf("row %s failed with the poison row's claim: %v", s.Delivery.ID(), s.Err)
		}
	}
	for _, r := range e.rows(tb) {
		want := "archived"
		if r.ID == poison {
			want = "q"
		}
		if r.Group != want {
			t.Errorf("row %d is in group %q, want %q", r.ID, r.Group, want)
		}
	}
}

// customClaim replaces the claim with the service's own SQL: newest row first.
func customClaim(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	e.create(tb)
	p := e.publisher(tb, "q")
	first := e.publish(p, Refund{Card: "old"})
	last := e.publish(p, Refund{Card: "new"})
	d := f.Dialect
	q := func(s string) string { return d.Quote(s) }
	ev := func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		pick := "SELECT " + q("id") + " FROM " + q("q") + " WHERE " + q("grp") + " = " + d.Placeholder(2) + " AND " + q("processed_at") +
			" IS NULL ORDER BY " + q("id") + " DESC LIMIT 1"
		if in.Form == sqlqueue.FormLease {
			// A lease claim must skip leased rows and stamp the token it is given; the token
			// is unique to this claim, so a second statement reads the claimed rows back
			// without needing UPDATE … RETURNING.
			pick = strings.Replace(pick, " ORDER BY", " AND ("+q("locked_until")+" IS NULL OR "+q("locked_until")+" <= "+d.Placeholder(3)+") ORDER BY", 1)
			// the inner SELECT is wrapped once more so that MySQL-style engines accept it
			return []sqlqueue.Statement{
				{SQL: "UPDATE " + q("q") + " SET " + q("locked_until") + " = " + d.Placeholder(1) + ", " + q("attempt") + " = " +
					q("attempt") + " + 1 WHERE " + q("id") + " IN (SELECT " + q("id") + " FROM (" + pick + ") AS newest)",
					Args: []any{in.Token, in.Group, in.Now}},
				{SQL: "SELECT " + q("id") + ", " + q("payload") + ", " + q("attempt") + ", " + q("headers") + " FROM " + q("q") +
					" WHERE " + q("locked_until") + " = " + d.Placeholder(1), Args: []any{in.Token}},
			}, nil
		}
		return []sqlqueue.Statement{{SQL: "SELECT " + q("id") + ", " + q("payload") + ", " + q("attempt") + " + 1, " + q("headers") + " FROM " + q("q") +
			" WHERE " + q("id") + " IN (SELECT " + q("id") + " FROM (" + strings.Replace(pick, d.Placeholder(2), d.Placeholder(1), 1) + ") AS newest)",
			Args: []any{in.Group}}}, nil
	}
	order := make(chan string, 2)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		order <- m.ID()
		return nil
	}, sqlqueue.OnEvent(sqlqueue.EventClaim, ev), sqlqueue.BatchSize(1))
	stop := e.run(a)
	s := e.rec.WaitSettled(2)
	stop()
	got := []string{<-order, <-order}
	if got[0] != fmt.Sprint(last) || got[1] != fmt.Sprint(first) {
		t.Errorf("handled %v; want newest first: [%d %d]", got, last, first)
	}
	for _, x := range s {
		if x.Err != nil || x.Delivery.Attempt() != 1 {
			t.Errorf("settlement of %s: attempt %d, %v", x.Delivery.ID(), x.Delivery.Attempt(), x.Err)
		}
	}
}

// settlementFails: a delivery whose settlement keeps failing (its custom ack event errors:
// what a plugin that crashes, or a trigger that refuses the statement, looks like) is held
// back for a doubling backoff on the clock before it comes again (1 s, 2 s, 4 s), the other
// rows keep flowing meanwhile, each failure records why in last_error, the attempts still
// count, and the cap ends the loop: the delivery past it goes to the dead letter without its
// handler. The failures are logged once per interval with their count. (A failing ack was
// retaken at once: thousands of handler runs a second, the cap never reached, the rest of the
// queue starved.)
func settlementFails(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("q")
	tb.Columns.LastError = "last_error"
	e.create(tb)
	p := e.publisher(tb, "q")
	poison := e.publish(p, Refund{Card: "poison"})
	var others []int64
	for i := range 6 {
		others = append(others, e.publish(p, Refund{Amount: i}))
	}
	errLedger := errors.New("the ledger refuses this refund")
	d := f.Dialect
	ev := func(ctx context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		if in.ID == poison {
			return nil, errLedger
		}
		q := "UPDATE " + d.Quote("q") + " SET " + d.Quote("grp") + " = " + d.Placeholder(1) + ", " + d.Quote("locked_until") +
			" = NULL WHERE " + d.Quote("id") + " = " + d.Placeholder(2)
		args := []any{"archived", in.ID}
		if in.Form == sqlqueue.FormLease {
			q += " AND " + d.Quote("locked_until") + " = " + d.Placeholder(3)
			args = append(args, in.Token)
		}
		return []sqlqueue.Statement{{SQL: q, Args: args}}, nil
	}
	var mu sync.Mutex
	var runs []time.Time // when the poison row's handler ran, on the clock
	workers := 2
	if which == sqlqueue.FormRowLock {
		// One claim at a time: on InnoDB a claim scanning the group index beside another
		// claim's ack moving rows out of the group is now and then a deadlock victim, a
		// settlement failure of its own (held back too, which a clock standing still would
		// keep back); and the test-only SQLite row-lock form holds the database per claim.
		workers = 1
	}
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		if m.Payload.Card == "poison" {
			mu.Lock()
			runs = append(runs, e.clock.Now())
			mu.Unlock()
		}
		return nil
	}, sqlqueue.OnEvent(sqlqueue.EventAck, ev), core.DeadLetterAfter(crashLoopCap, "q.dead"), core.Workers(workers))
	stop := e.run(a)
	failures := func(n int) func([]core.Settlement) bool {
		return func(all []core.Settlement) bool {
			failed, ok := 0, 0
			for _, s := range all {
				switch {
				case s.Delivery.ID() == fmt.Sprint(poison) && s.Err != nil:
					failed++
				case s.Err == nil && s.Verdict.Action == core.ActAck:
					ok++
				}
			}
			return failed >= n && ok == len(others)
		}
	}
	// The other rows settle while the poison row fails, the clock standing still.
	e.rec.WaitFor(failures(1))
	at := Epoch
	for i, backoff := range []time.Duration{sqlqueue.FailureBackoff, 2 * sqlqueue.FailureBackoff, 4 * sqlqueue.FailureBackoff} {
		var row *Row
		for _, r := range e.rows(tb) {
			if r.ID == poison {
				row = &r
			}
		}
		if row == nil {
			t.Fatalf("failure %d: the poison row is gone", i+1)
		}
		// The lease form too holds the row in retry_after and clears its lease: a lease end
		// in the past marks a claim that lapsed without a settlement.
		if which == sqlqueue.FormLease {
			e.isNull(fmt.Sprintf("failure %d: the poison row's lease", i+1), row.LockedUntil)
		}
		e.timeIs(fmt.Sprintf("failure %d: the poison row's hold", i+1), row.RetryAfter, at.Add(backoff))
		if !strings.Contains(row.LastError, errLedger.Error()) {
			t.Errorf("failure %d: last_error = %q; want the failed settlement's cause", i+1, row.LastError)
		}
		if row.Attempt != i+1 {
			t.Errorf("failure %d: attempt = %d; want %d (the attempt counts)", i+1, row.Attempt, i+1)
		}
		at = at.Add(backoff)
		e.clock.Advance(backoff)
		if i < 2 {
			e.rec.WaitFor(failures(i + 2))
		}
	}
	// The fourth delivery is past the cap: the dead letter, without the handler.
	e.rec.WaitFor(func(all []core.Settlement) bool {
		last := all[len(all)-1]
		return last.Delivery.ID() == fmt.Sprint(poison) && last.Verdict.Action == core.ActDeadLetter
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	want := []time.Time{Epoch, Epoch.Add(sqlqueue.FailureBackoff), Epoch.Add(3 * sqlqueue.FailureBackoff)}
	if len(runs) != len(want) {
		t.Fatalf("the poison row's handler ran %d times (%v); want %d", len(runs), runs, len(want))
	}
	for i := range want {
		if !runs[i].Equal(want[i]) {
			t.Errorf("run %d at %v; want %v (no sooner than the backoff after the last failure)", i+1, runs[i], want[i])
		}
	}
	for _, r := range e.rows(tb) {
		switch {
		case r.ID == poison:
			if r.Group != "q.dead" || r.Attempt != crashLoopCap+1 || !strings.Contains(r.LastError, "not settled after 3 attempts") {
				t.Errorf("poison row = group %q attempt %d last_error %q; want q.dead, attempt %d, not settled after 3 attempts",
					r.Group, r.Attempt, r.LastError, crashLoopCap+1)
			}
		case r.Group != "archived":
			t.Errorf("row %d in group %q; want archived by its ack", r.ID, r.Group)
		}
	}
	lines := e.logs.Find("sqlqueue: settlements failing; each failing row is held back for a doubling backoff before it is delivered again")
	if len(lines) != 1 || lines[0].Attrs["failures"] != int64(1) || lines[0].Attrs["queue"] != "q" {
		t.Errorf("failure log lines = %+v; want one (three failures within the log interval), with the count and queue", lines)
	}
}
