package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// logEvents is a slog handler that sends every record's message on a channel (dropping them
// when nobody reads), so a test can wait for something the code only logs.
type logEvents chan string

func (l logEvents) Enabled(context.Context, slog.Level) bool { return true }
func (l logEvents) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default:
	}
	return nil
}
func (l logEvents) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logEvents) WithGroup(string) slog.Handler      { return l }

// waitLog waits for a logged message containing want.
func waitLog(t *testing.T, l logEvents, want string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case m := <-l:
			if strings.Contains(m, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no log %q within %v", want, waitTimeout)
		}
	}
}

// idle waits until the App's one lease subscription has armed its timers (poll and lease
// extension): it found the queue empty and waits.
func idle(t *testing.T, v *clock.Virtual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := v.BlockUntil(ctx, n); err != nil {
		t.Fatalf("the subscription never went idle: %v", err)
	}
}

// otherPublisher publishes from a second pool and DB, as another process would: the
// in-process wake-up of the subscriber's DB does not reach across, only NOTIFY does.
func otherPublisher(t *testing.T, e *env) *sqlqueue.Publisher {
	t.Helper()
	pool := newPool(t, e.schema, 2)
	t.Cleanup(pool.Close)
	db, err := postgres.New(context.Background(), pool, postgres.Notify(true))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := postgres.NewPublisher(db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// idleOnJobs makes a lease subscription of h on a fresh table jobs, on a virtual clock whose
// poll never fires, and waits until it is idle: only LISTEN/NOTIFY can wake it.
func idleOnJobs(t *testing.T, e *env, h core.Handler[string]) (*app, *clock.Virtual) {
	t.Helper()
	e.standard("jobs")
	v := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := newApp(e, v)
	ep, err := postgres.Lease(e.db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(a.App, ep, h); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	idle(t, v, 2)
	return a, v
}

// TestNotifyWakesAcrossProcesses: on the virtual clock the subscription's poll never fires, so
// a row published by another pool reaches the handler only through LISTEN/NOTIFY.
func TestNotifyWakesAcrossProcesses(t *testing.T) {
	e := setup(t, postgres.Notify(true))
	got := make(chan string, 1)
	a, _ := idleOnJobs(t, e, func(ctx context.Context, m *core.Message[string]) error {
		got <- m.Payload
		return nil
	})
	if _, err := sqlqueue.Publish(context.Background(), otherPublisher(t, e), "from afar"); err != nil {
		t.Fatal(err)
	}
	if s := a.next(t); s.Err != nil || s.Verdict.Action != core.ActAck {
		t.Fatalf("settlement = %+v", s)
	}
	if p := <-got; p != "from afar" {
		t.Fatalf("payload = %q", p)
	}
	if n := e.count(`SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// TestNotifyInTxOnCommitOnly: a publish inside a transaction that rolls back notifies nobody
// and leaves no row; the one that commits wakes the subscription.
func TestNotifyInTxOnCommitOnly(t *testing.T) {
	e := setup(t, postgres.Notify(true))
	a, _ := idleOnJobs(t, e, func(ctx context.Context, m *core.Message[string]) error { return nil })
	pub := otherPublisher(t, e)
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sqlqueue.Publish(ctx, pub, "x", postgres.InTx(tx)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := a.next(t); s.Err != nil {
		t.Fatal(s.Err)
	}
	if n := e.count(`SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// TestListenerReconnects: the LISTEN connection's backend is terminated; the listener
// reconnects, and a row published by another pool still wakes the subscription without a
// poll.
func TestListenerReconnects(t *testing.T) {
	logs := make(logEvents, 64)
	e := setup(t, postgres.Notify(true), postgres.WithLogger(slog.New(logs)))
	a, v := idleOnJobs(t, e, func(ctx context.Context, m *core.Message[string]) error { return nil })
	if n := terminate(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, e.schema+" (settle listener)"); n != 1 {
		t.Fatalf("terminated %d listener backends; want 1", n)
	}
	waitLog(t, logs, "LISTEN connection restored")
	idle(t, v, 2)
	if _, err := sqlqueue.Publish(context.Background(), otherPublisher(t, e), "after"); err != nil {
		t.Fatal(err)
	}
	if s := a.next(t); s.Err != nil {
		t.Fatal(s.Err)
	}
}

// TestBackendTerminatedMidHandler: in each form, the connection that holds the delivery's row
// (the claim transaction, the advisory key's connection; in the lease form every idle pooled
// connection) is terminated while the handler works. The settlement may fail, but the row
// comes back and is settled by a later delivery, nothing is lost, and the subscription goes on
// to the next row. These run on the wall clock with a short poll and lease: what they exercise
// is the server dropping a connection, which the virtual clock cannot stage.
func TestBackendTerminatedMidHandler(t *testing.T) {
	kill := map[string]string{
		"lease":    `SELECT pid FROM pg_stat_activity WHERE application_name = $1`,
		"rowlock":  `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`,
		"advisory": `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND a.application_name = $1`,
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.standard("jobs")
			e.exec(`INSERT INTO jobs (payload) VALUES ('"first"')`)
			a := newApp(e, nil)
			ep, err := f.ep(e.db, plainTable("jobs"), "")
			if err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan int, 4), make(chan struct{})
			var calls atomic.Int32
			if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[string]) error {
				if calls.Add(1) == 1 {
					entered <- m.Attempt()
					<-release
				}
				return nil
			}, append(leaseFor(f.name, time.Second), sqlqueue.PollInterval(20*time.Millisecond))...); err != nil {
				t.Fatal(err)
			}
			a.start(t)
			<-entered
			if n := terminate(t, kill[f.name], e.schema); n == 0 {
				t.Fatalf("terminated no backend")
			}
			close(release)
			acked, failed := 0, 0
			for acked == 0 {
				s := a.next(t)
				switch {
				case s.Err != nil:
					failed++
					if f.name != "lease" && !errors.Is(s.Err, postgres.ErrConnLost) {
						t.Errorf("settlement error %v does not match postgres.ErrConnLost", s.Err)
					}
				case s.Verdict.Action == core.ActAck:
					acked++
				default:
					t.Fatalf("unexpected settlement %v", s.Verdict)
				}
			}
			// The row lock and the advisory key went with their connection, so the first
			// settlement cannot have landed; the lease form may have found a live connection.
			if f.name != "lease" && failed == 0 {
				t.Fatalf("the settlement on the terminated connection did not fail")
			}
			if got := calls.Load(); failed > 0 && got < 2 {
				t.Fatalf("the row did not come back: %d handler calls", got)
			}
			if left := e.count(`SELECT count(*) FROM jobs`); left != 0 {
				t.Fatalf("%d rows left after the ack", left)
			}
			e.exec(`INSERT INTO jobs (payload) VALUES ('"second"')`)
			if s := a.next(t); s.Err != nil {
				t.Fatalf("the subscription did not go on after the lost connection: %v", s.Err)
			}
			if left := e.count(`SELECT count(*) FROM jobs`); left != 0 {
				t.Fatalf("%d rows left", left)
			}
		})
	}
}

// terminate ends the backends whose pids the query selects, from a connection of its own, and
// waits (up to 5 s each) until they are gone; it returns how many it ended. The pids are
// selected first (OFFSET 0 keeps the planner from evaluating pg_terminate_backend on rows the
// filter would have dropped).
func terminate(t *testing.T, pids string, args ...any) int {
	t.Helper()
	admin := newPool(t, "", 1)
	defer admin.Close()
	var n int
	if err := admin.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM (`+pids+` OFFSET 0) AS victims(pid)`, args...).Scan(&n); err != nil {
		t.Fatalf("terminating backends: %v", err)
	}
	return n
}

// TestBadInput: what PostgreSQL can tell that the engine cannot.
func TestBadInput(t *testing.T) {
	e := setup(t)
	e.standard("jobs")
	start := func(ep core.Endpoint, opts ...core.Option) error {
		a := core.New(core.WithoutSignals(), core.WithLogger(testLogger()))
		a.Register(e.db)
		if err := core.Subscribe(a, ep, func(context.Context, *core.Message[string]) error { return nil }, opts...); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		return a.Run(ctx)
	}
	t.Run("missing schema", func(t *testing.T) {
		tb := plainTable("jobs")
		tb.Schema = "no_such_schema"
		ep, err := postgres.Lease(e.db, tb, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := start(ep); err == nil || !strings.Contains(err.Error(), `schema "no_such_schema" does not exist`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("identifier over 63 bytes", func(t *testing.T) {
		long := strings.Repeat("t", 64)
		if _, err := postgres.Lease(e.db, plainTable(long), ""); err == nil || !strings.Contains(err.Error(), "at most 63") {
			t.Fatalf("table: err = %v", err)
		}
		tb := plainTable("jobs")
		tb.Columns.Attempt = long
		if _, err := postgres.RowLock(e.db, tb, ""); err == nil || !strings.Contains(err.Error(), "at most 63") {
			t.Fatalf("column: err = %v", err)
		}
	})
	t.Run("wrong column type", func(t *testing.T) {
		e.exec(`CREATE TABLE wrong (id bigint PRIMARY KEY, payload bytea, attempt text, retry_after timestamptz, locked_until timestamptz, headers jsonb, created_at timestamptz)`)
		ep, err := postgres.Lease(e.db, plainTable("wrong"), "")
		if err != nil {
			t.Fatal(err)
		}
		var ce *sqlqueue.ColumnError
		if err := start(ep); !errors.As(err, &ce) || ce.Column != "attempt" || !strings.Contains(err.Error(), "text") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("advisory pool too small", func(t *testing.T) {
		ep, err := postgres.Advisory(e.db, plainTable("jobs"), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := start(ep, core.Workers(12)); err == nil || !strings.Contains(err.Error(), "raise pool_max_conns to at least 13") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unreachable server", func(t *testing.T) {
		db, err := postgres.Open(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
		if err != nil {
			t.Fatal(err) // pgxpool connects lazily: Open itself succeeds
		}
		a := core.New(core.WithoutSignals(), core.WithLogger(testLogger()))
		a.Register(db)
		ep, err := postgres.Lease(db, plainTable("jobs"), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(a, ep, func(context.Context, *core.Message[string]) error { return nil }); err != nil {
			t.Fatal(err)
		}
		err = a.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "postgres: read server version") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("advisory key func", func(t *testing.T) {
		if _, err := postgres.New(context.Background(), e.pool, postgres.AdvisoryKeyFunc("hashtext(%s)::bigint + %d")); err == nil {
			t.Fatal("a key function with two verbs was accepted")
		}
	})
}

// TestNamedSchema: a queue table and its dead-letter table addressed by schema, on a pool
// whose search_path does not reach them, with NOTIFY across pools.
func TestNamedSchema(t *testing.T) {
	e := setup(t)
	pool := newPool(t, "", 12) // search_path: the server's default, not the test's schema
	db, err := postgres.New(context.Background(), pool, postgres.Notify(true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = db.Close()
		if st := settledStat(pool); st.AcquiredConns() != 0 {
			t.Errorf("%d connections still acquired", st.AcquiredConns())
		}
		pool.Close()
	}()
	tb, dead := plainTable("jobs"), plainTable("jobs_dead")
	tb.Schema, dead.Schema = e.schema, e.schema
	ctx := context.Background()
	for _, x := range []sqlqueue.Table{tb, dead} {
		if err := db.CreateTable(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	v := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := &app{settled: make(chan core.Settlement, 16)}
	a.App = core.New(core.WithoutSignals(), core.WithClock(v), core.WithLogger(testLogger()),
		core.WithObserver(func(s core.Settlement) { a.settled <- s }))
	a.Register(db)
	ep, err := postgres.Lease(db, tb, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[string]) error {
		if m.Payload == "bad" {
			return core.Retry()
		}
		return nil
	}, core.DeadLetterAfter(1, e.schema+".jobs_dead")); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	idle(t, v, 2)
	other := newPool(t, "", 2)
	defer other.Close()
	odb, err := postgres.New(context.Background(), other, postgres.Notify(true))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := postgres.NewPublisher(odb, tb, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"good", "bad"} {
		if _, err := sqlqueue.Publish(ctx, pub, p); err != nil {
			t.Fatal(err)
		}
		s := a.next(t)
		if s.Err != nil {
			t.Fatal(s.Err)
		}
	}
	a.stop(t)
	if n := e.count(`SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if n := e.count(`SELECT count(*) FROM jobs_dead WHERE payload = '"bad"'`); n != 1 {
		t.Fatalf("dead letter holds %d rows; want the bad one", n)
	}
}

// TestAdvisorySkipsKeysHeldElsewhere: a row whose advisory key another session holds is left
// out of the candidates query (pg_locks), so a claimant with a window of one row takes the
// next free row at once instead of trying the held one and waiting for the poll (which, on
// the virtual clock, never comes).
func TestAdvisorySkipsKeysHeldElsewhere(t *testing.T) {
	e := setup(t)
	e.standard("jobs")
	ctx := context.Background()
	pub, err := postgres.NewPublisher(e.db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"held", "free"} {
		if _, err := sqlqueue.Publish(ctx, pub, p); err != nil {
			t.Fatal(err)
		}
	}
	other := newPool(t, e.schema, 1)
	defer other.Close()
	conn, err := other.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The key the engine locks for a row: "<schema>.<table>:" (the table as the catalogue
	// names it) and the dialect's KeyText of its id.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1 || tableoid::text || ':' || id::text, 0))
		FROM jobs WHERE id = (SELECT min(id) FROM jobs)`, e.schema+".jobs:"); err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := newApp(e, v)
	ep, err := postgres.Advisory(e.db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	if err := core.Subscribe(a.App, ep, func(_ context.Context, m *core.Message[string]) error {
		got <- m.Payload
		return nil
	}, sqlqueue.BatchSize(1)); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	if s := a.next(t); s.Err != nil || s.Verdict.Action != core.ActAck {
		t.Fatalf("settlement = %+v", s)
	}
	if p := <-got; p != "free" {
		t.Fatalf("took %q, want the row whose key is free", p)
	}
	if n := e.count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d rows left, want the held one", n)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	idle(t, v, 1)
	v.Advance(sqlqueue.DefaultPollInterval)
	if p := <-got; p != "held" {
		t.Fatalf("took %q after the key was released", p)
	}
}
