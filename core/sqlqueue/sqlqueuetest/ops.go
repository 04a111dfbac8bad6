package sqlqueuetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/ops/opstest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// opsShape is a table shape of the operations suite: where the queue and its dead letter live.
type opsShape struct {
	name        string
	table, dead sqlqueue.Table // dead is table itself for a group dead letter
	group       string         // the queue's group, "" for a table without a group column
	deadName    string         // the dead-letter group or table, as NewOps takes it
	origin      string         // the queue's name as dead letters record it
}

func opsShapes() []opsShape {
	grouped := sqlqueue.StandardTable("refunds")
	grouped.Columns.LastError = "last_error"
	plain := sqlqueue.StandardTable("jobs")
	plain.Columns.Group = ""
	plain.Columns.LastError = "last_error"
	plainDead := plain
	plainDead.Name = "jobs_dead"
	return []opsShape{
		{name: "group", table: grouped, dead: grouped, group: "refunds", deadName: "refunds.dead", origin: "refunds"},
		{name: "table", table: plain, dead: plainDead, deadName: "jobs_dead", origin: "jobs"},
	}
}

// deadGroup is the group a dead letter has in sh.dead ("" in a dead-letter table).
func (sh opsShape) deadGroup() string {
	if sh.table.Columns.Group != "" {
		return sh.deadName
	}
	return ""
}

// RunOps runs the operations suite (core/ops/opstest) on the dialect, for both table shapes
// (a dead-letter group, a dead-letter table), and the SQL-specific cases: stats by state
// against rows the dialect's client wrote, what a table without the optional columns cannot
// measure, missing tables, and a redriven row processed by a real subscription.
func RunOps(t *testing.T, open Open) {
	for _, sh := range opsShapes() {
		t.Run(sh.name, func(t *testing.T) {
			opstest.Run(t, opstest.Features{Ready: true, Dead: true, OldestReady: true}, func(t *testing.T) opstest.Backend {
				return opsBackend(t, open(t), sh)
			})
			t.Run("StatsByState", func(t *testing.T) { testOpsStatsByState(t, open(t), sh) })
			t.Run("RedriveProcessed", func(t *testing.T) { testOpsRedriveProcessed(t, open(t), sh) })
			t.Run("EngineDeadLetter", func(t *testing.T) { testOpsEngineDeadLetter(t, open(t), sh) })
			t.Run("ReasonFromLastError", func(t *testing.T) { testOpsLastError(t, open(t), sh) })
		})
	}
	t.Run("Unmeasured", func(t *testing.T) { testOpsUnmeasured(t, open(t)) })
	t.Run("MissingTables", func(t *testing.T) { testOpsMissing(t, open(t)) })
}

func newOps(t testing.TB, f *Fixture, sh opsShape, opts ...sqlqueue.OpsOption) *sqlqueue.Ops {
	t.Helper()
	o, err := sqlqueue.NewOps(context.Background(), f.Dialect, f.DB, sh.table, sh.group, sh.deadName, opts...)
	if err != nil {
		t.Fatalf("NewOps(%s, %q, %q): %v", sh.table.Name, sh.group, sh.deadName, err)
	}
	return o
}

func opsBackend(t *testing.T, f *Fixture, sh opsShape) opstest.Backend {
	e := newEnv(t, f)
	e.create(sh.table)
	if sh.dead.Name != sh.table.Name {
		e.create(sh.dead)
	}
	queue := e.publisher(sh.table, sh.group)
	dead := e.publisher(sh.dead, sh.deadGroup())
	d := f.Dialect
	read := func(t testing.TB, tb sqlqueue.Table, group string) []Row {
		rows, err := f.Rows(e.ctx, tb)
		if err != nil {
			t.Fatalf("reading %s: %v", tb.Name, err)
		}
		var out []Row
		for _, r := range rows {
			if r.Group == group && r.ProcessedAt == nil {
				out = append(out, r)
			}
		}
		return out
	}
	return opstest.Backend{
		Queue:  newOps(t, f, sh, sqlqueue.OpsClock(e.clock)),
		Origin: sh.origin,
		AddDead: func(t testing.TB, payload []byte, h map[string]string) string {
			id, err := dead.PublishRaw(e.ctx, payload, sqlqueue.WithHeaders(h))
			if err != nil {
				t.Fatal(err)
			}
			// The move to the dead letter keeps the row's attempt (the final count) and its
			// last_error (the reason, which the dead-letter headers repeat).
			info, _, _ := core.ParseDeadLetterInfo(h)
			if err := f.Exec(e.ctx, "UPDATE "+d.Quote(sh.dead.Name)+" SET "+d.Quote("attempt")+" = "+d.Placeholder(1)+
				", "+d.Quote("last_error")+" = "+d.Placeholder(2)+" WHERE "+d.Quote("id")+" = "+d.Placeholder(3), info.Count, info.Error, id); err != nil {
				t.Fatal(err)
			}
			return itoa(id)
		},
		AddReady: func(t testing.TB, payload []byte) {
			if _, err := queue.PublishRaw(e.ctx, payload); err != nil {
				t.Fatal(err)
			}
		},
		Ready: func(t testing.TB) []opstest.Message {
			var out []opstest.Message
			for _, r := range read(t, sh.table, sh.group) {
				out = append(out, opstest.Message{Payload: r.Payload, Attempts: r.Attempt})
				if r.Attempt == 0 && r.LastError != "" {
					t.Errorf("redriven row %d has its attempts reset but keeps last_error %q", r.ID, r.LastError)
				}
			}
			return out
		},
		Dead: func(t testing.TB) [][]byte {
			var out [][]byte
			for _, r := range read(t, sh.dead, sh.deadGroup()) {
				out = append(out, r.Payload)
			}
			return out
		},
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// testOpsStatsByState writes rows in every state with the dialect's own client and checks each
// figure, on a virtual clock.
func testOpsStatsByState(t *testing.T, f *Fixture, sh opsShape) {
	e := newEnv(t, f)
	e.create(sh.table)
	if sh.dead.Name != sh.table.Name {
		e.create(sh.dead)
	}
	p := e.publisher(sh.table, sh.group)
	d := f.Dialect
	e.publish(p, Refund{Card: "oldest"}) // created at Epoch
	e.clock.Advance(30 * time.Second)
	for range 2 {
		e.publish(p, Refund{Card: "ready"})
	}
	for range 3 {
		e.publish(p, Refund{Card: "later"}, sqlqueue.Delay(time.Minute))
	}
	leased := e.publish(p, Refund{Card: "leased"})
	done := e.publish(p, Refund{Card: "processed"})
	expired := e.publish(p, Refund{Card: "lease ran out"})
	set := func(col string, v any, id int64) {
		t.Helper()
		if err := f.Exec(e.ctx, "UPDATE "+d.Quote(sh.table.Name)+" SET "+d.Quote(col)+" = "+d.Placeholder(1)+
			" WHERE "+d.Quote("id")+" = "+d.Placeholder(2), v, id); err != nil {
			t.Fatal(err)
		}
	}
	set("locked_until", d.Time(Epoch.Add(5*time.Minute)), leased)
	set("locked_until", d.Time(Epoch), expired) // a lease in the past: ready again
	set("processed_at", d.Time(Epoch), done)
	dp := e.publisher(sh.dead, sh.deadGroup())
	e.publish(dp, Refund{Card: "dead"})

	e.clock.Advance(50 * time.Second) // now Epoch+80s: the delays (to Epoch+90s) are still ahead
	o := newOps(t, f, sh, sqlqueue.OpsClock(e.clock))
	s, err := o.Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := ops.Stats{Ready: 4, Delayed: 3, InFlight: 1, Dead: 1, OldestReady: 80 * time.Second}
	if s.Ready != want.Ready || s.Delayed != want.Delayed || s.InFlight != want.InFlight || s.Dead != want.Dead ||
		s.OldestReady != want.OldestReady || len(s.Unmeasured) != 0 {
		t.Errorf("stats: ready %d, delayed %d, in flight %d, dead %d, oldest %v, unmeasured %v; want %d, %d, %d, %d, %v and none",
			s.Ready, s.Delayed, s.InFlight, s.Dead, s.OldestReady, s.Unmeasured,
			want.Ready, want.Delayed, want.InFlight, want.Dead, want.OldestReady)
	}
	if !s.At.Equal(Epoch.Add(80 * time.Second)) {
		t.Errorf("stats taken at %v, want the clock's %v", s.At, Epoch.Add(80*time.Second))
	}
	e.clock.Advance(time.Minute) // the delays are due, the lease has 2.5 minutes left
	if s, err = o.Stats(e.ctx); err != nil {
		t.Fatal(err)
	}
	if s.Ready != 7 || s.Delayed != 0 || s.InFlight != 1 {
		t.Errorf("after the delays: ready %d, delayed %d, in flight %d; want 7, 0, 1", s.Ready, s.Delayed, s.InFlight)
	}
}

// testOpsUnmeasured checks what a table without locked_until and created_at reports.
func testOpsUnmeasured(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	tb := sqlqueue.StandardTable("bare")
	tb.Columns.LockedUntil, tb.Columns.CreatedAt = "", ""
	e.create(tb)
	e.publish(e.publisher(tb, "bare"), Refund{Card: "x"})
	s, err := newOps(t, f, opsShape{table: tb, group: "bare"}).Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ready != 1 || s.Measured(ops.FigureInFlight) || s.Measured(ops.FigureOldestReady) || s.Measured(ops.FigureDead) {
		t.Errorf("bare table: ready %d, unmeasured %v; want 1 and in_flight, oldest_ready and dead unmeasured", s.Ready, s.Unmeasured)
	}
	if _, err := newOps(t, f, opsShape{table: tb, group: "bare"}).ListDead(e.ctx, ops.Filter{}, ops.Page{}); !errors.Is(err, ops.ErrNoDeadLetter) {
		t.Errorf("ListDead without a dead letter: %v, want ErrNoDeadLetter", err)
	}
}

// testOpsMissing checks that a missing table or dead-letter table is refused by NewOps.
func testOpsMissing(t *testing.T, f *Fixture) {
	e := newEnv(t, f)
	_, err := sqlqueue.NewOps(e.ctx, f.Dialect, f.DB, sqlqueue.StandardTable("nowhere"), "q", "q.dead")
	var te *ops.TargetError
	if !errors.As(err, &te) || !errors.Is(err, ops.ErrTargetNotFound) {
		t.Errorf("NewOps on a missing table: %v, want an ops.TargetError", err)
	}
	plain := sqlqueue.StandardTable("jobs")
	plain.Columns.Group = ""
	e.create(plain)
	_, err = sqlqueue.NewOps(e.ctx, f.Dialect, f.DB, plain, "", "jobs_dead")
	if !errors.Is(err, ops.ErrTargetNotFound) {
		t.Errorf("NewOps with a missing dead-letter table: %v, want ErrTargetNotFound", err)
	}
	if _, err := sqlqueue.DetectTable(e.ctx, f.Dialect, f.DB, sqlqueue.TableRef{Name: "nowhere"}); !errors.Is(err, ops.ErrTargetNotFound) {
		t.Errorf("DetectTable on a missing table: %v, want ErrTargetNotFound", err)
	}
	got, err := sqlqueue.DetectTable(e.ctx, f.Dialect, f.DB, sqlqueue.TableRef{Name: "jobs"})
	if err != nil || got.Columns != plain.Columns {
		t.Errorf("DetectTable(jobs) = %+v, %v; want %+v", got.Columns, err, plain.Columns)
	}
}

// testOpsRedriveProcessed redrives a dead letter and lets a lease subscription process it: the
// row is then marked processed, read with the dialect's client.
func testOpsRedriveProcessed(t *testing.T, f *Fixture, sh opsShape) {
	if f.Lease == nil {
		t.Skip("the dialect has no lease form")
	}
	e := newEnv(t, f)
	e.create(sh.table)
	if sh.dead.Name != sh.table.Name {
		e.create(sh.dead)
	}
	dead := e.publisher(sh.dead, sh.deadGroup())
	id := e.publish(dead, Refund{Card: "redriven", Amount: 7},
		sqlqueue.WithHeaders(core.DeadLetterInfo{Count: 3, Origin: sh.origin, At: Epoch, Error: "timeout"}.Headers()))
	o := newOps(t, f, sh)
	if n, err := o.Redrive(e.ctx, ops.IDs(itoa(id)), ops.RedriveOptions{}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	a := e.app(clock.Real())
	got := make(chan Refund, 1)
	subscribe(e, a, e.endpoint(form{"lease", sqlqueue.FormLease, f.Lease}, sh.table, sh.group),
		func(ctx context.Context, m *core.Message[Refund]) error {
			if m.Attempt() != 1 {
				t.Errorf("the redriven message's first delivery is attempt %d, want 1", m.Attempt())
			}
			got <- m.Payload
			return nil
		})
	stop := e.run(a)
	if r := waitFor(t, got, "the redriven message"); r.Card != "redriven" || r.Amount != 7 {
		t.Errorf("handled %+v", r)
	}
	e.rec.WaitSettled(1)
	stop()
	rows := e.rows(sh.table)
	if len(rows) != 1 || rows[0].ProcessedAt == nil {
		t.Errorf("queue table after processing: %+v; want the one row, processed", rows)
	}
	if s, err := o.Stats(e.ctx); err != nil || s.Dead != 0 || s.Ready != 0 {
		t.Errorf("stats after processing: %+v, %v", s, err)
	}
}

// testOpsEngineDeadLetter lets a lease subscription move a failing row to its dead letter and
// reads why with Ops: the reason, origin and count the engine recorded.
func testOpsEngineDeadLetter(t *testing.T, f *Fixture, sh opsShape) {
	if f.Lease == nil {
		t.Skip("the dialect has no lease form")
	}
	e := newEnv(t, f)
	e.create(sh.table)
	if sh.dead.Name != sh.table.Name {
		e.create(sh.dead)
	}
	e.publish(e.publisher(sh.table, sh.group), Refund{Card: "down"})
	a := e.app(clock.Real())
	subscribe(e, a, e.endpoint(form{"lease", sqlqueue.FormLease, f.Lease}, sh.table, sh.group),
		func(ctx context.Context, m *core.Message[Refund]) error {
			return core.Retry().Because(errors.New("card processor timeout"))
		}, core.DeadLetterAfter(2, sh.deadName))
	stop := e.run(a)
	e.rec.WaitFor(func(all []core.Settlement) bool {
		return len(all) > 0 && all[len(all)-1].Verdict.Action == core.ActDeadLetter
	})
	stop()
	page, err := newOps(t, f, sh).ListDead(e.ctx, ops.Filter{}, ops.Page{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListDead = %+v, %v; want the one dead letter", page, err)
	}
	d := page.Items[0]
	if d.Count != 2 || d.Origin != sh.origin || d.DeadAt.IsZero() ||
		d.Reason != "retry at attempt 2 of 2: card processor timeout" {
		t.Errorf("the engine's dead letter reads count %d, origin %q, dead at %v, reason %q", d.Count, d.Origin, d.DeadAt, d.Reason)
	}
}

// testOpsLastError reads the reason of a dead row without dead-letter headers from last_error.
func testOpsLastError(t *testing.T, f *Fixture, sh opsShape) {
	e := newEnv(t, f)
	e.create(sh.table)
	if sh.dead.Name != sh.table.Name {
		e.create(sh.dead)
	}
	id := e.publish(e.publisher(sh.dead, sh.deadGroup()), Refund{Card: "old"})
	d := f.Dialect
	if err := f.Exec(e.ctx, "UPDATE "+d.Quote(sh.dead.Name)+" SET "+d.Quote("last_error")+" = "+d.Placeholder(1)+", "+
		d.Quote("attempt")+" = 4 WHERE "+d.Quote("id")+" = "+d.Placeholder(2), "moved before headers were kept", id); err != nil {
		t.Fatal(err)
	}
	got, err := newOps(t, f, sh).GetDead(e.ctx, itoa(id))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != "moved before headers were kept" || got.Count != 4 || got.Origin != "" {
		t.Errorf("dead row without headers: reason %q, count %d, origin %q", got.Reason, got.Count, got.Origin)
	}
}
