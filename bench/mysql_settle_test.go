package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
)

// myQueueTable describes myBenchDDL's table: no group, no processed_at (ack deletes).
func myQueueTable() sqlqueue.Table {
	t := sqlqueue.StandardTable("q")
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	return t
}

// mySettle drains the table through a settle App: subs subscriptions of the form on the one
// queue (each its own claimant, as each raw worker is), each with workers handlers and claims
// of batch rows. The handler acknowledges a Raw payload and does nothing else.
func mySettle(name string, form func(*mysql.DB, sqlqueue.Table, string) (core.Endpoint, error), subs, workers, batch int, opts ...core.Option) myContender {
	return myContender{name: name, conns: subs*workers + subs + 2, drain: func(ctx context.Context, db *mysql.DB, n int) (time.Duration, error) {
		var settled atomic.Int64
		var failed atomic.Pointer[error]
		all := make(chan struct{})
		app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			core.WithObserver(func(s core.Settlement) {
				if s.Err != nil {
					err := s.Err
					failed.CompareAndSwap(nil, &err)
				}
				if settled.Add(1) == int64(n) {
					close(all)
				}
			}))
		h := func(context.Context, *core.Message[[]byte]) error { return nil }
		for i := range subs {
			ep, err := form(db, myQueueTable(), "")
			if err != nil {
				return 0, err
			}
			all := append([]core.Option{core.Name(fmt.Sprint("w", i)), core.WithCodec(core.Raw), core.Workers(workers)}, opts...)
			if batch > 0 { // 0: the default claim size
				all = append(all, sqlqueue.BatchSize(batch))
			}
			if err := core.Subscribe(app, ep, h, all...); err != nil {
				return 0, err
			}
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- app.Run(runCtx) }()
		select {
		case <-all:
		case err := <-done:
			stop()
			return 0, fmt.Errorf("App.Run ended early: %v", err)
		case <-ctx.Done():
			stop()
			return 0, ctx.Err()
		}
		taken := time.Since(start)
		stop()
		if err := <-done; err != nil {
			return 0, err
		}
		if p := failed.Load(); p != nil {
			return 0, fmt.Errorf("a settlement failed: %w", *p)
		}
		return taken, nil
	}}
}

// BenchmarkMariaDB drains the same queue through settle and through the raw loop of each
// form, in the same process against the same server, and reports the ratios and allocations
// per message.
func BenchmarkMariaDB(b *testing.B) {
	for range b.N {
		rs := runMyContenders(b, []myContender{
			myRaw("raw rowlock (w=4,B=100)", myRawRowLock, 4, 100),
			myRaw("raw rowlock grouped (w=4,B=100)", myRawRowLockGrouped, 4, 100),
			mySettle("settle rowlock (4 subs×1 worker,B=100)", mysql.RowLock, 4, 1, 100),
			mySettle("settle rowlock (1 sub×4 workers,B=100)", mysql.RowLock, 1, 4, 100),
			// CountAtClaim: what a subscription with DeadLetterAfter runs by default.
			mySettle("settle rowlock counted (4 subs×1 worker,B=100)", mysql.RowLock, 4, 1, 100, sqlqueue.CountAtClaim(true)),
			myRaw("raw rowlock LIMIT 1 (w=4)", myRawRowLock, 4, 1),
			mySettle("settle rowlock LIMIT 1 (4 subs×1 worker)", mysql.RowLock, 4, 1, 1),
			mySettle("settle rowlock counted LIMIT 1 (4 subs×1 worker)", mysql.RowLock, 4, 1, 1, sqlqueue.CountAtClaim(true)),
			myRaw("raw lease (w=4,B=100)", myRawLease, 4, 100),
			mySettle("settle lease (4 subs×1 worker,B=100)", mysql.Lease, 4, 1, 100),
			mySettle("settle lease (1 sub×4 workers,B=100)", mysql.Lease, 1, 4, 100),
		})
		// Each raw worker is one claimant working its batch in turn; so is a subscription
		// with one worker. The one-subscription rows show what a single claimant reaches.
		reportMy(b, rs, map[string]string{
			"settle rowlock (4 subs×1 worker,B=100)":           "raw rowlock (w=4,B=100)",
			"settle rowlock (1 sub×4 workers,B=100)":           "raw rowlock (w=4,B=100)",
			"settle rowlock LIMIT 1 (4 subs×1 worker)":         "raw rowlock LIMIT 1 (w=4)",
			"settle rowlock counted (4 subs×1 worker,B=100)":   "raw rowlock (w=4,B=100)",
			"settle rowlock counted LIMIT 1 (4 subs×1 worker)": "raw rowlock LIMIT 1 (w=4)",
			"settle lease (4 subs×1 worker,B=100)":             "raw lease (w=4,B=100)",
			"settle lease (1 sub×4 workers,B=100)":             "raw lease (w=4,B=100)",
		})
	}
}

// BenchmarkMariaDBDefaults drains the queue through one settle subscription with no option at
// all (one worker, the default claim size) in the row-lock and lease forms, beside the raw
// loops with one claimant and claims of 100 rows and of sqlqueue.DefaultMaxBatch rows (the size
// the default claims grow to on a backlog), interleaved in one run. Each settle default is
// paired with the raw loop of its form at DefaultMaxBatch; the row-lock defaults with the
// grouped raw loop (one DELETE per claim), as the engine settles a claim's acks with one
// statement. The row-by-row loop is shown beside it.
//
//	go test -run '^$' -bench 'BenchmarkMariaDBDefaults$' -benchtime 1x ./bench
func BenchmarkMariaDBDefaults(b *testing.B) {
	maxB := sqlqueue.DefaultMaxBatch
	rawGroupedMax := fmt.Sprintf("raw rowlock grouped (w=1,B=%d)", maxB)
	rawLeaseMax := fmt.Sprintf("raw lease (w=1,B=%d)", maxB)
	for range b.N {
		rs := runMyContenders(b, []myContender{
			myRaw("raw rowlock (w=1,B=100)", myRawRowLock, 1, 100),
			myRaw("raw rowlock grouped (w=1,B=100)", myRawRowLockGrouped, 1, 100),
			myRaw(rawGroupedMax, myRawRowLockGrouped, 1, maxB),
			mySettle("settle rowlock, defaults", mysql.RowLock, 1, 1, 0),
			myRaw("raw lease (w=1,B=100)", myRawLease, 1, 100),
			myRaw(rawLeaseMax, myRawLease, 1, maxB),
			mySettle("settle lease, defaults", mysql.Lease, 1, 1, 0),
		})
		reportMy(b, rs, map[string]string{
			"settle rowlock, defaults": rawGroupedMax,
			"settle lease, defaults":   rawLeaseMax,
		})
	}
}
