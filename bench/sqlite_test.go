//go:build cgo

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
	sqlitepure "github.com/settlehq/settle/dialect-sqlite-purego"
)

// BenchmarkSQLite drains a SQLite queue table through both SQLite dialects side by side:
// dialect-sqlite (mattn/go-sqlite3, C) and dialect-sqlite-purego (modernc.org/sqlite, pure Go),
// each with 1 and 8 workers, with the defaults (synchronous=FULL, the default claim size: from
// 10 rows per worker, sized by the engine) and tuned (synchronous=NORMAL, claims of 200 rows). Every drain is the lease
// form, ack deleting the row, on a fresh file seeded with N rows. The contenders run in
// interleaved rounds (each round in another order), and the table gives each one's median with
// the range of its rounds, and the purego÷cgo ratio of each configuration: the median of the
// per-round ratios, with their range. The file needs cgo (dialect-sqlite does).
//
//	go test -run '^$' -bench 'BenchmarkSQLite$' -benchtime 1x ./bench
//
// SETTLE_BENCH_SQLITE_N rows per drain (default 20000), SETTLE_BENCH_SQLITE_ROUNDS rounds
// (default 5).
func BenchmarkSQLite(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	rounds := envInt(b, "SETTLE_BENCH_SQLITE_ROUNDS", 5)
	type config struct {
		workers int
		tuned   bool
	}
	var configs []config
	for _, tuned := range []bool{false, true} {
		for _, w := range []int{1, 8} {
			configs = append(configs, config{w, tuned})
		}
	}
	dialects := []sqliteBenchDialect{cgoSQLite{}, pureSQLite{}}
	type key struct {
		c config
		d int
	}
	rates := map[key][]float64{}
	allocs := map[key][]float64{}
	for r := range rounds {
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			for j := range dialects {
				d := (j + r) % len(dialects)
				rate, al := drainSQLite(b, dialects[d], n, c.workers, c.tuned)
				rates[key{c, d}] = append(rates[key{c, d}], rate)
				allocs[key{c, d}] = append(allocs[key{c, d}], al)
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\nSQLite drain, N=%d, %d interleaved rounds, GOMAXPROCS=%d\n\n", n, rounds, runtime.GOMAXPROCS(0))
	fmt.Fprintln(&out, "| configuration | dialect-sqlite msgs/s (min–max) | dialect-sqlite-purego msgs/s (min–max) | purego÷cgo (min–max) | allocs/msg cgo / purego |")
	fmt.Fprintln(&out, "| --- | ---: | ---: | ---: | ---: |")
	for _, c := range configs {
		name := fmt.Sprintf("%d worker(s), defaults (FULL, claims from %d, sized by the engine)", c.workers, min(10*c.workers, 100))
		if c.tuned {
			name = fmt.Sprintf("%d worker(s), tuned (NORMAL, claims of 200)", c.workers)
		}
		cg, pu := rates[key{c, 0}], rates[key{c, 1}]
		ratios := make([]float64, len(cg))
		for i := range cg {
			ratios[i] = pu[i] / cg[i]
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %.2f (%.2f–%.2f) | %.1f / %.1f |\n", name, spread(cg), spread(pu),
			med(ratios), slices.Min(ratios), slices.Max(ratios), med(allocs[key{c, 0}]), med(allocs[key{c, 1}]))
		tag := fmt.Sprintf("w%d", c.workers)
		if c.tuned {
			tag += "-tuned"
		}
		b.ReportMetric(med(cg), "cgo-"+tag+"-msgs/s")
		b.ReportMetric(med(pu), "purego-"+tag+"-msgs/s")
	}
	b.Log(out.String())
}

func envInt(b *testing.B, name string, def int) int {
	v, err := strconv.Atoi(coretest.Env(name, strconv.Itoa(def)))
	if err != nil || v < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, os.Getenv(name))
	}
	return v
}

func med(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func spread(xs []float64) string {
	return fmt.Sprintf("%.0f (%.0f–%.0f)", med(xs), slices.Min(xs), slices.Max(xs))
}

// sqliteBenchDialect opens a file with one of the two dialects and gives what the drain needs.
type sqliteBenchDialect interface {
	open(ctx context.Context, path string, normal bool) (sqliteBenchDB, error)
}

type sqliteBenchDB struct {
	pool    *sql.DB
	dialect sqlqueue.Dialect
	backend core.Backend
	create  func(context.Context, sqlqueue.Table) error
	lease   func(sqlqueue.Table, string) (core.Endpoint, error)
}

type cgoSQLite struct{}

func (cgoSQLite) open(ctx context.Context, path string, normal bool) (sqliteBenchDB, error) {
	s := sqlite.Full
	if normal {
		s = sqlite.Normal
	}
	db, err := sqlite.Open(ctx, path, sqlite.Synchronous(s))
	if err != nil {
		return sqliteBenchDB{}, err
	}
	return sqliteBenchDB{db.Pool(), db.Dialect(), db, db.CreateTable,
		func(t sqlqueue.Table, g string) (core.Endpoint, error) { return sqlite.Lease(db, t, g) }}, nil
}

type pureSQLite struct{}

func (pureSQLite) open(ctx context.Context, path string, normal bool) (sqliteBenchDB, error) {
	s := sqlitepure.Full
	if normal {
		s = sqlitepure.Normal
	}
	db, err := sqlitepure.Open(ctx, path, sqlitepure.Synchronous(s))
	if err != nil {
		return sqliteBenchDB{}, err
	}
	return sqliteBenchDB{db.Pool(), db.Dialect(), db, db.CreateTable,
		func(t sqlqueue.Table, g string) (core.Endpoint, error) { return sqlitepure.Lease(db, t, g) }}, nil
}

// drainSQLite seeds a fresh file with n rows and drains them through an App with one lease
// subscription; it returns msgs/s and allocations per message of the whole process.
func drainSQLite(b *testing.B, d sqliteBenchDialect, n, workers int, tuned bool) (float64, float64) {
	var opts []core.Option
	if tuned {
		opts = append(opts, sqlqueue.BatchSize(200))
	}
	return drainSQLiteOpts(b, d, n, workers, tuned, opts...)
}

// drainSQLiteOpts is drainSQLite with the subscription's options besides Workers.
func drainSQLiteOpts(b *testing.B, d sqliteBenchDialect, n, workers int, tuned bool, extra ...core.Option) (float64, float64) {
	b.Helper()
	ctx := context.Background()
	db, err := d.open(ctx, filepath.Join(b.TempDir(), "bench.db"), tuned)
	if err != nil {
		b.Fatal(err)
	}
	t := sqlqueue.StandardTable("q")
	t.Columns.ProcessedAt = "" // ack deletes
	if err := db.create(ctx, t); err != nil {
		b.Fatal(err)
	}
	seedSQLite(b, db, n)

	var settled atomic.Int64
	done := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithObserver(func(s core.Settlement) {
		if s.Err != nil {
			b.Errorf("settlement failed: %v", s.Err)
		}
		if settled.Add(1) == int64(n) {
			close(done)
		}
	}))
	app.Register(db.backend) // closed when the App stops
	ep, err := db.lease(t, "q")
	if err != nil {
		b.Fatal(err)
	}
	opts := append([]core.Option{core.WithCodec(core.Raw), core.Workers(workers)}, extra...)
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[[]byte]) error { return nil }, opts...); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- app.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("App.Run ended early: %v", err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return float64(n) / took.Seconds(), float64(after.Mallocs-before.Mallocs) / float64(n)
}

// seedSQLite inserts n ready rows into the queue table q in one transaction.
func seedSQLite(b *testing.B, db sqliteBenchDB, n int) {
	b.Helper()
	tx, err := db.pool.Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO "q" ("payload", "grp", "attempt", "created_at") VALUES (?, 'q', 0, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	payload, now := []byte(`{"card":"4242","cents":100}`), db.dialect.Time(time.Now())
	for range n {
		if _, err := ins.Exec(payload, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
