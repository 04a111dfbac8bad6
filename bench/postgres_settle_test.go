package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// benchTable describes the table pgBenchDDL creates: no group, no processed_at (ack deletes).
func benchTable(s string) sqlqueue.Table {
	t := sqlqueue.StandardTable("q")
	t.Schema = s
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	return t
}

// settleDrain runs an App with subs no-op subscriptions on the table in form ep (each one
// claimant with its workers, as subs processes would run) and times it from Run until the
// n-th settlement is durable (the observer sees settlements after commit).
func settleDrain(ctx context.Context, pool *pgxpool.Pool, s string, n, subs int,
	ep func(*postgres.DB, sqlqueue.Table, string) (core.Endpoint, error), opts ...core.Option) (time.Duration, error) {
	db, err := postgres.New(context.Background(), pool)
	if err != nil {
		return 0, err
	}
	var settled, failed atomic.Int64
	all := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		core.WithObserver(func(st core.Settlement) {
			if st.Err != nil {
				failed.Add(1)
				return
			}
			if settled.Add(1) == int64(n) {
				close(all)
			}
		}))
	app.Register(db)
	for i := range subs {
		e, err := ep(db, benchTable(s), "")
		if err != nil {
			return 0, err
		}
		all := append([]core.Option{core.WithCodec(core.Raw), core.Name(fmt.Sprintf("q%d", i))}, opts...)
		if err := core.Subscribe(app, e, func(context.Context, *core.Message[[]byte]) error { return nil }, all...); err != nil {
			return 0, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- app.Run(runCtx) }()
	select {
	case <-all:
	case err := <-done:
		return 0, fmt.Errorf("App.Run returned early: %v", err)
	case <-ctx.Done():
		return 0, fmt.Errorf("%w after %d of %d settlements (%d failed)", ctx.Err(), settled.Load(), n, failed.Load())
	}
	elapsed := time.Since(start)
	stop()
	if err := <-done; err != nil {
		return 0, err
	}
	if f := failed.Load(); f != 0 {
		return 0, fmt.Errorf("%d settlements failed", f)
	}
	return elapsed, nil
}

func settleContender(name string, conns, subs int, ep func(*postgres.DB, sqlqueue.Table, string) (core.Endpoint, error), opts ...core.Option) pgContender {
	return pgContender{name: name, seed: true, conns: conns, drain: func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error) {
		return settleDrain(ctx, pool, s, n, subs, ep, opts...)
	}}
}

// BenchmarkPostgresDefaults drains the queue through one settle subscription with no option at
// all (one worker, the default claim size) in the lease and row-lock forms, beside the raw
// loops running the engine's statements with one claimant and claims of 100 rows and of
// sqlqueue.DefaultMaxBatch rows (the size the default claims grow to on a backlog), interleaved
// in one run on one server; the row lock also beside a raw loop sending the engine's statements
// in its two round trips a claim (pipelined). Each settle default is paired with the raw loops
// of its form at DefaultMaxBatch (per-round ratios below the table).
//
//	go test -run '^$' -bench 'BenchmarkPostgresDefaults$' -benchtime 1x ./bench
func BenchmarkPostgresDefaults(b *testing.B) {
	maxB := sqlqueue.DefaultMaxBatch
	rawLeaseMax := fmt.Sprintf("raw lease engine stmts (w=1,B=%d)", maxB)
	rawRowLockMax := fmt.Sprintf("raw rowlock batched (w=1,B=%d)", maxB)
	rawRowLockPipe := fmt.Sprintf("raw rowlock pipelined (w=1,B=%d)", maxB)
	for range b.N {
		rs := runPGContenders(b, []pgContender{
			rawContender("raw lease engine stmts (w=1,B=100)", rawLeaseEngine, 1, 100),
			rawContender(rawLeaseMax, rawLeaseEngine, 1, maxB),
			settleContender("settle lease, defaults", 4, 1, postgres.Lease),
			rawContender("raw rowlock batched (w=1,B=100)", rawRowLock, 1, 100),
			rawContender(rawRowLockMax, rawRowLock, 1, maxB),
			rawContender(rawRowLockPipe, rawRowLockPipelined, 1, maxB),
			settleContender("settle rowlock, defaults", 4, 1, postgres.RowLock),
		})
		reportPG(b, rs, "raw lease engine stmts (w=1,B=100)", "")
		reportPairs(b, rs, map[string][]string{
			"settle lease, defaults":   {rawLeaseMax},
			"settle rowlock, defaults": {rawRowLockMax, rawRowLockPipe},
		})
	}
}
