//go:build cgo

package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// BenchmarkSQLiteTrace and BenchmarkSQLiteTraceRaw drain a SQLite queue (dialect-sqlite,
// FULL, lease form, one worker) through a database/sql driver that wraps mattn/go-sqlite3 and
// counts what reaches it: each statement by its text (IN lists folded), BEGINs (with the
// connection), commits, rollbacks, and the time spent in each kind and inside transactions.
// The first drains with settle's defaults, the second with the raw loop of
// BenchmarkSQLiteDefaults. They print to stderr; rates are of the counted drain, not for
// comparison with BenchmarkSQLiteDefaults.
//
//	go test -run '^$' -bench 'BenchmarkSQLiteTrace' -benchtime 1x ./bench
//
// SETTLE_BENCH_SQLITE_N rows (default 20000). SETTLE_BENCH_SQLITE_TRACE_NOCTX=1 hands the
// driver's BEGIN and Exec a context that never ends (an experiment: the driver then runs them
// without a goroutine of its own). BenchmarkSQLiteSettleOnly and BenchmarkSQLiteRawOnly drain
// without the counting driver, b.N times each, for profiles (-cpuprofile, -trace); the raw one
// claims SETTLE_BENCH_SQLITE_B rows at a time (default 100).

// stmtCounter counts what the counting driver sees.
type stmtCounter struct {
	mu   sync.Mutex
	n    map[string]int
	d    map[string]time.Duration
	last time.Time // when the last transaction ended (zero: none yet)
}

// between adds the time since the last transaction ended to "between-tx": the time the
// database had no transaction open in the middle of the drain.
func (c *stmtCounter) between(now time.Time) {
	c.mu.Lock()
	if !c.last.IsZero() {
		c.d["between-tx"] += now.Sub(c.last)
	}
	c.mu.Unlock()
}

func (c *stmtCounter) ended(now time.Time) {
	c.mu.Lock()
	c.last = now
	c.mu.Unlock()
}

func (c *stmtCounter) time(kind string, d time.Duration) {
	c.mu.Lock()
	c.d[kind] += d
	c.mu.Unlock()
}

var inListRE = regexp.MustCompile(`\(\?(, \?)*\)`)

func (c *stmtCounter) add(kind, q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q = inListRE.ReplaceAllString(q, "(?…)")
	c.n[kind+" "+q]++
}

func (c *stmtCounter) report(b *testing.B, name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out strings.Builder
	fmt.Fprintf(&out, "\n%s, %d rows:\n", name, n)
	for _, k := range keys {
		fmt.Fprintf(&out, "%6d  %s\n", c.n[k], k)
	}
	for k, d := range c.d {
		fmt.Fprintf(&out, "%-10s %v\n", k, d)
	}
	fmt.Fprint(os.Stderr, out.String())
}

var traceCounter = &stmtCounter{n: map[string]int{}, d: map[string]time.Duration{}}
var traceOnce sync.Once
var noCtx = os.Getenv("SETTLE_BENCH_SQLITE_TRACE_NOCTX") != ""

type countDriver struct{ d *sqlite3.SQLiteDriver }

func (d countDriver) Open(name string) (driver.Conn, error) {
	c, err := d.d.Open(name)
	if err != nil {
		return nil, err
	}
	return &countConn{c.(*sqlite3.SQLiteConn)}, nil
}

type countConn struct{ c *sqlite3.SQLiteConn }

func (c *countConn) Prepare(q string) (driver.Stmt, error) {
	traceCounter.add("prepare", q)
	return c.c.Prepare(q)
}
func (c *countConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	traceCounter.add("prepare", q)
	return c.c.PrepareContext(ctx, q)
}
func (c *countConn) Close() error { return c.c.Close() }
func (c *countConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}
func (c *countConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	traceCounter.add("begin", fmt.Sprintf("conn %p", c))
	t0 := time.Now()
	traceCounter.between(t0)
	if noCtx {
		ctx = context.Background()
	}
	tx, err := c.c.BeginTx(ctx, o)
	traceCounter.time("begin", time.Since(t0))
	if err != nil {
		return nil, err
	}
	return countTx{tx, time.Now()}, nil
}
func (c *countConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	traceCounter.add("exec", q)
	t0 := time.Now()
	defer func() { traceCounter.time("exec", time.Since(t0)) }()
	if noCtx {
		ctx = context.Background()
	}
	return c.c.ExecContext(ctx, q, args)
}
func (c *countConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	traceCounter.add("query", q)
	t0 := time.Now()
	defer func() { traceCounter.time("query", time.Since(t0)) }()
	return c.c.QueryContext(ctx, q, args)
}

type countTx struct {
	tx    driver.Tx
	start time.Time
}

func (t countTx) Commit() error {
	traceCounter.add("commit", "")
	t0 := time.Now()
	err := t.tx.Commit()
	end := time.Now()
	traceCounter.time("commit", end.Sub(t0))
	traceCounter.time("in-tx", end.Sub(t.start))
	traceCounter.ended(end)
	return err
}
func (t countTx) Rollback() error { traceCounter.add("rollback", ""); return t.tx.Rollback() }

func openCounting(b *testing.B) sqliteBenchDB {
	traceOnce.Do(func() { sql.Register("sqlite3_counting", countDriver{&sqlite3.SQLiteDriver{}}) })
	path := filepath.Join(b.TempDir(), "bench.db")
	pool, err := sql.Open("sqlite3_counting", "file:"+path+"?_txlock=immediate&_busy_timeout=5000&_synchronous=FULL&_journal_mode=WAL")
	if err != nil {
		b.Fatal(err)
	}
	db, err := sqlite.New(context.Background(), pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	return sqliteBenchDB{db.Pool(), db.Dialect(), db, db.CreateTable,
		func(t sqlqueue.Table, g string) (core.Endpoint, error) { return sqlite.Lease(db, t, g) }}
}

func BenchmarkSQLiteTrace(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	ctx := context.Background()
	db := openCounting(b)
	t := sqlqueue.StandardTable("q")
	t.Columns.ProcessedAt = ""
	if err := db.create(ctx, t); err != nil {
		b.Fatal(err)
	}
	seedSQLite(b, db, n)
	traceCounter.n = map[string]int{}
	traceCounter.d = map[string]time.Duration{}
	traceCounter.last = time.Time{}
	var settled atomic.Int64
	done := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithObserver(func(s core.Settlement) {
		if settled.Add(1) == int64(n) {
			close(done)
		}
	}))
	ep, err := db.lease(t, "q")
	if err != nil {
		b.Fatal(err)
	}
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[[]byte]) error { return nil }, core.WithCodec(core.Raw), core.Workers(1)); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- app.Run(runCtx) }()
	<-done
	took := time.Since(start)
	traceCounter.report(b, fmt.Sprintf("settle defaults (%.0f msgs/s)", float64(n)/took.Seconds()), n)
	cancel()
	<-ran
}

func BenchmarkSQLiteTraceRaw(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	db := openCounting(b)
	rate := rawSQLiteLeaseOn(b, db, n, envInt(b, "SETTLE_BENCH_SQLITE_B", 100), func() {
		traceCounter.n = map[string]int{}
		traceCounter.d = map[string]time.Duration{}
		traceCounter.last = time.Time{}
	})
	traceCounter.report(b, fmt.Sprintf("raw (%.0f msgs/s)", rate), n)
}

func BenchmarkSQLiteSettleOnly(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	for range b.N {
		rate, _ := drainSQLite(b, cgoSQLite{}, n, 1, false)
		fmt.Fprintf(os.Stderr, "settle %.0f\n", rate)
	}
}

func BenchmarkSQLiteRawOnly(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	for range b.N {
		fmt.Fprintf(os.Stderr, "raw %.0f\n", rawSQLiteLease(b, n, envInt(b, "SETTLE_BENCH_SQLITE_B", 100)))
	}
}
