package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// pgURL is the server the tests run against.
func pgURL() string { return coretest.PostgresURL() }

// waitTimeout bounds every wait in real time; running out fails the test.
const waitTimeout = 20 * time.Second

// env is one test's isolated database: a schema of its own (dropped after the test), a pool
// with search_path set to it, and a DB over the pool.
type env struct {
	t      testing.TB
	schema string
	pool   *pgxpool.Pool
	db     *postgres.DB
}

// newPool connects a pool whose sessions use schema (when not empty) as their search_path.
func newPool(t testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		t.Fatalf("SETTLE_TEST_PG_URL: %v", err)
	}
	cfg.MaxConns = maxConns
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		cfg.ConnConfig.RuntimeParams["application_name"] = schema
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		coretest.ServerUnavailable(t, "PostgreSQL", pgURL(), err)
	}
	return pool
}

// setup makes a fresh schema and a DB on it. The cleanup asserts that the pool lent out no
// connection that was not given back, then drops the schema.
func setup(t testing.TB, opts ...postgres.Option) *env {
	t.Helper()
	admin := newPool(t, "", 2)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e := &env{t: t, schema: "settle_test_" + hex.EncodeToString(b)}
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+e.schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	e.pool = newPool(t, e.schema, 12)
	db, err := postgres.New(context.Background(), e.pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() {
		_ = db.Close()
		st := settledStat(e.pool)
		if st.AcquiredConns() != 0 {
			t.Errorf("pool: %d connections still acquired after the test (total %d, idle %d): a connection leaked",
				st.AcquiredConns(), st.TotalConns(), st.IdleConns())
		}
		if st.TotalConns() != st.IdleConns()+st.ConstructingConns() {
			t.Errorf("pool: total %d != idle %d: a connection is held outside the pool", st.TotalConns(), st.IdleConns())
		}
		e.pool.Close()
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+e.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", e.schema, err)
		}
		admin.Close()
	})
	return e
}

// settledStat returns the pool's counts once no connection is being destroyed. pgxpool
// destroys a broken connection in a goroutine of its own (puddle's Resource.Destroy), and
// counts it as acquired until that is done; the pool has no event for it, so this looks
// again every few milliseconds, for at most five seconds, before it reports what it sees.
func settledStat(p *pgxpool.Pool) *pgxpool.Stat {
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st := p.Stat()
		if st.AcquiredConns() == 0 || time.Now().After(deadline) {
			return st
		}
		<-tick.C
	}
}

// exec runs statements on the test's schema, failing the test on error.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// count returns the single integer a query returns.
func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// app is a running App with an observer that reports settlements on a channel.
type app struct {
	*core.App
	settled chan core.Settlement
	cancel  context.CancelFunc
	done    chan error
}

// newApp returns an App on clk (nil: the wall clock) registered with e's DB, whose settlements
// arrive on settled (buffered generously: observers must not block).
func newApp(e *env, clk clock.Clock) *app {
	a := &app{settled: make(chan core.Settlement, 100000)}
	opts := []core.AppOption{core.WithoutSignals(), core.WithShutdownTimeout(10 * time.Second),
		core.WithLogger(testLogger()),
		core.WithObserver(func(s core.Settlement) { a.settled <- s })}
	if clk != nil {
		opts = append(opts, core.WithClock(clk))
	}
	a.App = core.New(opts...)
	a.Register(e.db)
	return a
}

// start runs the App until the test ends.
func (a *app) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan error, 1)
	go func() { a.done <- a.Run(ctx) }()
	t.Cleanup(func() { a.stop(t) })
}

// stop ends Run and waits for it.
func (a *app) stop(t testing.TB) {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("App.Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Errorf("App.Run did not return within %v of stopping", waitTimeout)
	}
}

// next waits for the next settlement.
func (a *app) next(t testing.TB) core.Settlement {
	t.Helper()
	select {
	case s := <-a.settled:
		return s
	case <-time.After(waitTimeout):
		t.Fatalf("no settlement within %v", waitTimeout)
	}
	return core.Settlement{}
}

// standard creates the standard table name without a group column in e's schema.
func (e *env) standard(name string) {
	e.t.Helper()
	ddl, err := postgres.TableDDL(plainTable(name))
	if err != nil {
		e.t.Fatal(err)
	}
	e.exec(ddl)
}

// testLogger discards logs unless SETTLE_TEST_LOG=1.
func testLogger() *slog.Logger {
	if coretest.Env("SETTLE_TEST_LOG", "") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
