//go:build cgo

package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// BenchmarkBacklog measures how the cost grows with a backlog (issue 21): N rows (default one
// million) published into a queue table and drained by one settle subscription with no option
// (one worker, the claim size the engine chooses), on three tables of each backend:
//
//   - delete: the standard table without processed_at (ack deletes the row);
//   - processed_at: the standard table (ack marks processed_at; the table keeps every row and
//     the claims rely on the ready index, partial on PostgreSQL and SQLite);
//   - delete + dead letters: the delete table with N/10 dead letters (group "q.dead", attempt 5,
//     the dead-letter headers) in the same table, a block of N/100 after every N/10 live rows.
//
// Every table has the group column (queue "q"), created by the dialect's CreateTable, so the three
// differ only by processed_at and by the dead letters.
//
// Publishing is timed twice: settle's Publisher (PublishRaw, no batch API exists: one INSERT per
// message, inside a transaction of 1000 messages, sqlqueue.InTx) fills the delete table, and a
// raw multi-row INSERT of 1000 rows per statement (autocommit) fills the other two; servers get
// four publishing goroutines, SQLite one. The drain is timed per tenth of N (throughput over
// the drain: does the claim get slower as the deleted or processed rows pile up?), and the
// process is measured while it drains: peak RSS (VmHWM, reset before the drain), allocations
// per message (runtime.MemStats.Mallocs), and the live heap after a forced GC at 10% and at 90%
// of the drain (anything that grows with the messages processed shows there).
//
//	go test -run '^$' -bench 'BenchmarkBacklog$' -benchtime 1x -timeout 60m ./bench
//
// SETTLE_BENCH_BACKLOG_N rows per table (default 1000000), SETTLE_BENCH_BACKLOG_ONLY=postgres,
// sqlite or mariadb runs one backend. On a PostgreSQL whose autovacuum is off (the CI server's)
// the benchmark runs VACUUM ANALYZE of the table after every tenth of a drain, as autovacuum
// would; SETTLE_BENCH_BACKLOG_VACUUM=off leaves it out, =on runs it regardless. The file needs
// cgo (dialect-sqlite does).
func BenchmarkBacklog(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_BACKLOG_N", 1000000)
	if n < 1000 {
		b.Fatalf("SETTLE_BENCH_BACKLOG_N=%d: want at least 1000", n)
	}
	only := os.Getenv("SETTLE_BENCH_BACKLOG_ONLY")
	type site struct {
		name string
		open func(ctx context.Context, b *testing.B) *backlogSite
	}
	sites := []site{{"postgres", pgBacklogSite}, {"sqlite", sqliteBacklogSite}, {"mariadb", myBacklogSite}}
	if only != "" && !slices.ContainsFunc(sites, func(s site) bool { return s.name == only }) {
		b.Fatalf("SETTLE_BENCH_BACKLOG_ONLY=%q: want postgres, sqlite or mariadb", only)
	}
	for range b.N {
		for _, s := range sites {
			if only != "" && only != s.name {
				continue
			}
			b.Run(s.name, func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
				defer cancel()
				runBacklog(ctx, b, s.open(ctx, b), n)
			})
		}
	}
}

// backlogDB is one handle on a backend, as a service would open it: the App registers it and
// closes it when it stops (a DB over a pool the site keeps leaves that pool open).
type backlogDB struct {
	backend   core.Backend
	d         sqlqueue.Dialect
	q         sqlqueue.DB
	lease     func(sqlqueue.Table, string) (core.Endpoint, error)
	publisher func(sqlqueue.Table, string) (*sqlqueue.Publisher, error)
	create    func(context.Context, sqlqueue.Table) error
}

// backlogSite is a backend with a place of its own for the benchmark's tables.
type backlogSite struct {
	name       string // the Record's backend
	publishers int    // concurrent publishing goroutines
	schema     string // the tables' schema (PostgreSQL); "" for none
	// open returns a fresh handle for table t (SQLite: t's own file).
	open func(ctx context.Context, t sqlqueue.Table) (backlogDB, error)
	// prepare runs after a table is seeded (PostgreSQL: VACUUM ANALYZE); nil for none.
	prepare func(ctx context.Context, t sqlqueue.Table) error
	// size is the table's size on disk, for the report; nil where it is not measured.
	size func(ctx context.Context, t sqlqueue.Table) (int64, error)
	// hint follows the table in the probe's FROM, as the engine's ClaimHint does (MySQL).
	hint func(t sqlqueue.Table) string
	// maintain stands in for the server's autovacuum where it is off (the CI PostgreSQL runs
	// with autovacuum = off): VACUUM ANALYZE of the table after every tenth of the drain, as
	// autovacuum would run about as often (its thresholds: 20% of the rows dead, 10% changed);
	// nil where the server cleans up by itself or has nothing to clean.
	maintain func(ctx context.Context, t sqlqueue.Table) error
	// buffers runs the probe under EXPLAIN (ANALYZE, BUFFERS) and returns the pages it
	// touched (PostgreSQL); nil elsewhere.
	buffers func(ctx context.Context, sql string, args ...any) (int64, error)
	// groupOrder spells the probe as the engine's claims do where the dialect is a
	// driver.GroupOrder (PostgreSQL, with the ready index): the group as a range of one value
	// and ORDER BY group, id, which only the ready index serves without a sort.
	groupOrder bool
}

func pgBacklogSite(ctx context.Context, b *testing.B) *backlogSite {
	admin, err := pgxpool.New(ctx, pgURL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(b, "PostgreSQL", pgURL(), err)
	}
	b.Cleanup(admin.Close)
	schema := fmt.Sprintf("settle_backlog_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ident := func(t sqlqueue.Table) string { return pgx.Identifier{schema, t.Name}.Sanitize() }
	var autovacuum string
	if err := admin.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil {
		b.Fatal(err)
	}
	var maintain func(ctx context.Context, t sqlqueue.Table) error
	switch v := os.Getenv("SETTLE_BENCH_BACKLOG_VACUUM"); {
	case v == "off":
	case v == "" && autovacuum == "on":
	case v == "" || v == "on":
		maintain = func(ctx context.Context, t sqlqueue.Table) error {
			_, err := admin.Exec(ctx, "VACUUM ANALYZE "+ident(t))
			return err
		}
	default:
		b.Fatalf("SETTLE_BENCH_BACKLOG_VACUUM=%q: want on, off or nothing", v)
	}
	fmt.Printf("postgres: autovacuum = %s; the benchmark runs VACUUM ANALYZE after every tenth of a drain: %v\n", autovacuum, maintain != nil)
	return &backlogSite{
		maintain: maintain,
		name:     "postgres", publishers: 4, schema: schema,
		open: func(ctx context.Context, t sqlqueue.Table) (backlogDB, error) {
			db, err := postgres.New(ctx, pool)
			if err != nil {
				return backlogDB{}, err
			}
			return backlogDB{db, db.Dialect(), db.Queue(),
				func(t sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.Lease(db, t, g) },
				func(t sqlqueue.Table, g string) (*sqlqueue.Publisher, error) { return postgres.NewPublisher(db, t, g) },
				db.CreateTable}, nil
		},
		prepare: func(ctx context.Context, t sqlqueue.Table) error {
			_, err := admin.Exec(ctx, "VACUUM ANALYZE "+ident(t))
			return err
		},
		size: func(ctx context.Context, t sqlqueue.Table) (int64, error) {
			var n int64
			err := admin.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", ident(t)).Scan(&n)
			return n, err
		},
		groupOrder: true,
		buffers: func(ctx context.Context, sql string, args ...any) (int64, error) {
			var out []byte
			if err := admin.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
				return 0, err
			}
			var plan []struct {
				Plan struct {
					Hit  int64 `json:"Shared Hit Blocks"`
					Read int64 `json:"Shared Read Blocks"`
				}
			}
			if err := json.Unmarshal(out, &plan); err != nil || len(plan) == 0 {
				return 0, fmt.Errorf("reading EXPLAIN: %v (%s)", err, out)
			}
			return plan[0].Plan.Hit + plan[0].Plan.Read, nil
		},
	}
}

func sqliteBacklogSite(ctx context.Context, b *testing.B) *backlogSite {
	dir := b.TempDir()
	return &backlogSite{
		name: "sqlite", publishers: 1,
		open: func(ctx context.Context, t sqlqueue.Table) (backlogDB, error) {
			db, err := sqlite.Open(ctx, filepath.Join(dir, t.Name+".db")) // synchronous=FULL
			if err != nil {
				return backlogDB{}, err
			}
			return backlogDB{db, db.Dialect(), db.Queue(),
				func(t sqlqueue.Table, g string) (core.Endpoint, error) { return sqlite.Lease(db, t, g) },
				func(t sqlqueue.Table, g string) (*sqlqueue.Publisher, error) { return sqlite.NewPublisher(db, t, g) },
				db.CreateTable}, nil
		},
		size: func(ctx context.Context, t sqlqueue.Table) (int64, error) {
			var n int64
			for _, suffix := range []string{".db", ".db-wal"} {
				if st, err := os.Stat(filepath.Join(dir, t.Name+suffix)); err == nil {
					n += st.Size()
				}
			}
			return n, nil
		},
	}
}

func myBacklogSite(ctx context.Context, b *testing.B) *backlogSite {
	admin, cfg := myAdminOrSkip(ctx, b)
	b.Cleanup(func() { _ = admin.Close() })
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "settle_backlog_" + hex.EncodeToString(rnd[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+name) })
	dcfg := cfg.Clone()
	dcfg.DBName = name
	return &backlogSite{
		name: "mariadb", publishers: 4,
		open: func(ctx context.Context, t sqlqueue.Table) (backlogDB, error) {
			db, err := mysql.Open(ctx, dcfg.FormatDSN())
			if err != nil {
				return backlogDB{}, err
			}
			db.Pool().SetMaxOpenConns(8)
			db.Pool().SetMaxIdleConns(8)
			return backlogDB{db, db.Dialect(), db.Queue(),
				func(t sqlqueue.Table, g string) (core.Endpoint, error) { return mysql.Lease(db, t, g) },
				func(t sqlqueue.Table, g string) (*sqlqueue.Publisher, error) { return mysql.NewPublisher(db, t, g) },
				db.CreateTable}, nil
		},
		size: func(ctx context.Context, t sqlqueue.Table) (int64, error) {
			var n sql.NullInt64 // the .ibd file: the table's statistics lag behind
			err := admin.QueryRowContext(ctx, "SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = ?", name+"/"+t.Name).Scan(&n)
			return n.Int64, err
		},
		hint: func(t sqlqueue.Table) string { return " FORCE INDEX (`" + t.Name + "_ready`)" },
	}
}

// backlogTable is one of the three tables a backend drains.
type backlogTable struct {
	label   string // the Record's series
	table   sqlqueue.Table
	mark    bool // ack sets processed_at
	dead    bool // holds dead letters
	publish string
}

const (
	backlogPublishSettle = "settle PublishRaw, tx of 1000"
	backlogPublishRaw    = "raw INSERT, 1000 rows per statement"
)

func backlogTables() []backlogTable {
	del := sqlqueue.StandardTable("q_del")
	del.Columns.ProcessedAt = ""
	mark := sqlqueue.StandardTable("q_mark")
	dead := sqlqueue.StandardTable("q_dead")
	dead.Columns.ProcessedAt = ""
	return []backlogTable{
		{label: "delete", table: del, publish: backlogPublishSettle},
		{label: "processed_at", table: mark, mark: true, publish: backlogPublishRaw},
		{label: "delete + dead letters", table: dead, dead: true, publish: backlogPublishRaw},
	}
}

// backlogResult is what one table's publish and drain measured.
type backlogResult struct {
	t           backlogTable
	rows        int     // rows inserted (with the dead letters)
	publishRate float64 // rows/s
	drainRate   float64 // msgs/s over the whole drain
	points      []float64
	allocs      float64 // per message
	peakMiB     float64
	peakHow     string
	heap        [2]runtime.MemStats // after a GC at 10% and at 90% of the drain
	goroutines  [2]int
	probe       [3]time.Duration // the ready-row scan before the drain, at 10% and at 90%
	probeBufs   [3]int64         // the pages it touched (PostgreSQL)
	vacuums     int              // VACUUM ANALYZE runs during the drain (backlogSite.maintain)
	sizeBefore  int64
	sizeAfter   int64
	loads       [2]float64
}

func runBacklog(ctx context.Context, b *testing.B, site *backlogSite, n int) {
	const tenths = 10
	var results []backlogResult
	for _, bt := range backlogTables() {
		bt.table.Schema = site.schema
		r := backlogResult{t: bt, loads: [2]float64{loadAverage(), 0}}
		r.rows, r.publishRate = backlogFill(ctx, b, site, bt, n)
		if site.prepare != nil {
			if err := site.prepare(ctx, bt.table); err != nil {
				b.Fatal(err)
			}
		}
		if site.size != nil {
			r.sizeBefore, _ = site.size(ctx, bt.table)
		}
		backlogDrain(ctx, b, site, bt, n, tenths, &r)
		if site.size != nil {
			r.sizeAfter, _ = site.size(ctx, bt.table)
		}
		r.loads[1] = loadAverage()
		results = append(results, r)
		fmt.Printf("%s %s: published %d rows at %.0f rows/s, drained %d at %.0f msgs/s (load %.1f→%.1f)\n",
			site.name, bt.label, r.rows, r.publishRate, n, r.drainRate, r.loads[0], r.loads[1])
	}
	reportBacklog(b, site.name, n, tenths, results)
}

// backlogFill creates bt's table and fills it with n ready rows (and, in the dead-letter table,
// n/10 dead letters), timed; it returns the rows inserted and their rate.
func backlogFill(ctx context.Context, b *testing.B, site *backlogSite, bt backlogTable, n int) (int, float64) {
	db, err := site.open(ctx, bt.table)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.backend.Close() }()
	if err := db.create(ctx, bt.table); err != nil {
		b.Fatal(err)
	}
	const chunk = 1000
	payload := []byte(`{"card":"4242","cents":100}`)
	// Chunks of 1000 rows; in the dead-letter table every eleventh chunk holds dead letters,
	// so that they sit among the live rows as letters that died while the backlog was written
	// would.
	type job struct {
		rows int
		dead bool
	}
	var jobs []job
	deadLeft := 0
	if bt.dead {
		deadLeft = n / 10
	}
	for left := n; left > 0 || deadLeft > 0; {
		if deadLeft > 0 && (len(jobs)%11 == 10 || left == 0) {
			k := min(chunk, deadLeft)
			jobs = append(jobs, job{rows: k, dead: true})
			deadLeft -= k
			continue
		}
		k := min(chunk, left)
		jobs = append(jobs, job{rows: k})
		left -= k
	}
	var pub *sqlqueue.Publisher
	if bt.publish == backlogPublishSettle {
		if pub, err = db.publisher(bt.table, "q"); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	rows := 0
	for _, j := range jobs {
		rows += j.rows
	}
	start := time.Now()
	for range site.publishers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				var err error
				switch {
				case pub != nil:
					err = backlogPublishTx(ctx, db.q, pub, payload, j.rows)
				default:
					err = backlogInsert(ctx, db, bt.table, payload, j.rows, j.dead)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		b.Fatalf("publishing to %s: %v", bt.table.Name, firstErr)
	}
	return rows, float64(rows) / took.Seconds()
}

// backlogPublishTx publishes k messages through settle's Publisher in one transaction.
func backlogPublishTx(ctx context.Context, q sqlqueue.DB, pub *sqlqueue.Publisher, payload []byte, k int) error {
	tx, err := q.Begin(ctx)
	if err != nil {
		return err
	}
	for range k {
		if _, err := pub.PublishRaw(ctx, payload, sqlqueue.InTx(tx)); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
	}
	return tx.Commit(ctx)
}

// backlogQTable is t's quoted, schema-qualified name in dialect d.
func backlogQTable(d sqlqueue.Dialect, t sqlqueue.Table) string {
	if t.Schema != "" {
		return d.Quote(t.Schema) + "." + d.Quote(t.Name)
	}
	return d.Quote(t.Name)
}

// backlogInsert inserts k rows with one multi-row INSERT (autocommit): ready rows of queue "q",
// or dead letters of it (group "q.dead", attempt 5, the dead-letter headers).
func backlogInsert(ctx context.Context, db backlogDB, t sqlqueue.Table, payload []byte, k int, dead bool) error {
	d := db.d
	now := time.Now().UTC().Truncate(time.Microsecond)
	cols := []string{"payload", "grp", "attempt", "created_at"}
	row := []any{payload, "q", int64(0), d.Time(now)}
	if dead {
		h := `{"settle-retry-count":"5","settle-origin":"q","settle-dead-at":"` + now.Format(time.RFC3339Nano) +
			`","settle-error":"retry at attempt 5 of 5: card processor: timeout after 30s"}`
		cols = append(cols, "headers")
		row = []any{payload, "q.dead", int64(5), d.Time(now), h}
	}
	for i, c := range cols {
		cols[i] = d.Quote(c)
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO " + backlogQTable(d, t) + " (" + strings.Join(cols, ", ") + ") VALUES ")
	args := make([]any, 0, k*len(row))
	for i := range k {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range row {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(d.Placeholder(len(args) + 1))
			args = append(args, row[j])
		}
		sb.WriteByte(')')
	}
	_, err := db.q.Exec(ctx, sb.String(), args...)
	return err
}

// backlogCount counts the rows of t in group grp (with cond, if any).
func backlogCount(ctx context.Context, db backlogDB, t sqlqueue.Table, grp, cond string) (int64, error) {
	q := "SELECT COUNT(*) FROM " + backlogQTable(db.d, t) + " WHERE " + db.d.Quote("grp") + " = " + db.d.Placeholder(1)
	if cond != "" {
		q += " AND " + cond
	}
	rows, err := db.q.Query(ctx, q, grp)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var c int64
	if rows.Next() {
		if err := rows.Scan(&c); err != nil {
			return 0, err
		}
	}
	return c, rows.Err()
}

// backlogDrain drains bt's n ready rows through an App with one lease subscription with no
// option, recording the time of every tenth of n, and measures the process meanwhile.
func backlogDrain(ctx context.Context, b *testing.B, site *backlogSite, bt backlogTable, n, tenths int, r *backlogResult) {
	db, err := site.open(ctx, bt.table)
	if err != nil {
		b.Fatal(err)
	}
	step := int64(n / tenths)
	marks := make([]atomic.Int64, tenths) // UnixNano at step×(i+1) settlements
	tick := make(chan int, tenths)
	done := make(chan struct{})
	var settled atomic.Int64
	var failed atomic.Pointer[error]
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(s core.Settlement) {
			if s.Err != nil {
				err := s.Err
				failed.CompareAndSwap(nil, &err)
				return
			}
			c := settled.Add(1)
			if c%step == 0 && c/step <= int64(tenths) {
				marks[c/step-1].Store(time.Now().UnixNano())
				tick <- int(c/step - 1)
			}
			if c == int64(n) {
				close(done)
			}
		}))
	app.Register(db.backend) // closed when the App stops
	ep, err := db.lease(bt.table, "q")
	if err != nil {
		b.Fatal(err)
	}
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[[]byte]) error { return nil }, core.WithCodec(core.Raw)); err != nil {
		b.Fatal(err)
	}

	// The service's memory from here: what earlier phases left is returned to the OS, and the
	// peak (VmHWM) is reset to the present (clear_refs 5, Linux 4.0+). A sampler of VmRSS
	// stands in where the reset is refused.
	debug.FreeOSMemory()
	hwmReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var sampled atomic.Int64
	sampleStop := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := procStatusKB("VmRSS"); kb > sampled.Load() {
				sampled.Store(kb)
			}
			select {
			case <-sampleStop:
				return
			case <-t.C:
			}
		}
	}()
	// The live heap after a GC at 10% and 90% of the drain, and the probe of the claim's scan,
	// taken off the settling goroutine.
	var probeErr [3]error
	var startNano atomic.Int64
	var maintErr error
	maint := make(chan struct{}, 1)
	maintDone := make(chan struct{})
	go func() {
		defer close(maintDone)
		for range maint {
			if err := site.maintain(ctx, bt.table); err != nil && maintErr == nil {
				maintErr = err
			}
			r.vacuums++
		}
	}()
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		for i := range tick {
			prev := startNano.Load()
			if i > 0 {
				prev = marks[i-1].Load()
			}
			fmt.Printf("  %s %s: %d drained, %.0f msgs/s in this tenth\n", site.name, bt.label, int64(i+1)*step,
				float64(step)/time.Duration(marks[i].Load()-prev).Seconds())
			k := -1
			switch i {
			case 0:
				k = 0
			case tenths - 2:
				k = 1
			}
			if k >= 0 {
				runtime.GC()
				runtime.ReadMemStats(&r.heap[k])
				r.goroutines[k] = runtime.NumGoroutine()
				r.probe[k+1], r.probeBufs[k+1], probeErr[k+1] = backlogProbe(ctx, site, db, bt)
			}
			if site.maintain != nil && i < tenths-1 {
				select { // one at a time; a tenth that ends while one runs skips its own
				case maint <- struct{}{}:
				default:
				}
			}
			if i == tenths-1 {
				return
			}
		}
	}()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.probe[0], r.probeBufs[0], probeErr[0] = backlogProbe(ctx, site, db, bt)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	start := time.Now()
	startNano.Store(start.UnixNano())
	go func() { ran <- app.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("%s %s: App.Run ended early after %d of %d settlements: %v", site.name, bt.label, settled.Load(), n, err)
	case <-ctx.Done():
		b.Fatalf("%s %s: %v after %d of %d settlements", site.name, bt.label, ctx.Err(), settled.Load(), n)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	<-monDone
	close(maint)
	<-maintDone
	close(sampleStop)
	<-sampleDone
	if hwmReset {
		r.peakMiB, r.peakHow = float64(procStatusKB("VmHWM"))/1024, "VmHWM"
	} else {
		r.peakMiB, r.peakHow = float64(sampled.Load())/1024, "VmRSS sampled every 50 ms"
	}
	stop()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	if p := failed.Load(); p != nil {
		b.Fatalf("%s %s: a settlement failed: %v", site.name, bt.label, *p)
	}
	if maintErr != nil {
		b.Fatalf("%s %s: VACUUM ANALYZE: %v", site.name, bt.label, maintErr)
	}
	for _, err := range probeErr {
		if err != nil {
			b.Fatalf("%s %s: probe: %v", site.name, bt.label, err)
		}
	}
	r.drainRate = float64(n) / took.Seconds()
	r.allocs = float64(after.Mallocs-before.Mallocs) / float64(n)
	prev := start.UnixNano()
	for i := range marks {
		at := marks[i].Load()
		r.points = append(r.points, float64(step)/time.Duration(at-prev).Seconds())
		prev = at
	}

	// Nothing left to claim, and the dead letters untouched.
	check, err := site.open(ctx, bt.table)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = check.backend.Close() }()
	cond := ""
	if bt.mark {
		cond = check.d.Quote("processed_at") + " IS NULL"
	}
	if left, err := backlogCount(ctx, check, bt.table, "q", cond); err != nil || left != 0 {
		b.Fatalf("%s %s: %d ready rows left (%v)", site.name, bt.label, left, err)
	}
	if bt.dead {
		if d, err := backlogCount(ctx, check, bt.table, "q.dead", ""); err != nil || d != int64(n/10) {
			b.Fatalf("%s %s: %d dead letters after the drain, want %d (%v)", site.name, bt.label, d, n/10, err)
		}
	}
}

// backlogProbe times the scan a claim runs to find its rows — the first 100 ready rows of
// queue "q", oldest first, without taking them — on the drain's own pool: the median of five
// runs, and on PostgreSQL the pages one run touches (EXPLAIN (ANALYZE, BUFFERS)), a cost the
// load of the machine does not change.
func backlogProbe(ctx context.Context, site *backlogSite, db backlogDB, bt backlogTable) (time.Duration, int64, error) {
	d := db.d
	from := backlogQTable(d, bt.table)
	if site.hint != nil {
		from += site.hint(bt.table)
	}
	grp, order := d.Quote("grp")+" = "+d.Placeholder(1), d.Quote("id")
	args := []any{"q", d.Time(time.Now().UTC().Truncate(time.Microsecond))}
	if site.groupOrder {
		grp = d.Quote("grp") + " >= " + d.Placeholder(1) + " AND " + d.Quote("grp") + " <= " + d.Placeholder(3)
		order = d.Quote("grp") + ", " + d.Quote("id")
		args = append(args, "q")
	}
	q := "SELECT " + d.Quote("id") + " FROM " + from + " WHERE " + grp
	if bt.mark {
		q += " AND " + d.Quote("processed_at") + " IS NULL"
	}
	q += " AND (" + d.Quote("retry_after") + " IS NULL OR " + d.Quote("retry_after") + " <= " + d.Placeholder(2) + ") AND " +
		d.Quote("locked_until") + " IS NULL ORDER BY " + order + " LIMIT 100"
	var runs []time.Duration
	for range 5 {
		start := time.Now()
		rows, err := db.q.Query(ctx, q, args...)
		if err != nil {
			return 0, 0, err
		}
		for rows.Next() {
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return 0, 0, err
		}
		runs = append(runs, time.Since(start))
	}
	slices.Sort(runs)
	var bufs int64
	if site.buffers != nil {
		var err error
		if bufs, err = site.buffers(ctx, q, args...); err != nil {
			return 0, 0, err
		}
	}
	return runs[len(runs)/2], bufs, nil
}

// procStatusKB reads a "kB" field of /proc/self/status (VmRSS, VmHWM); 0 where there is none.
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

func reportBacklog(b *testing.B, backend string, n, tenths int, rs []backlogResult) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nBacklog on %s, N=%d per table, one subscription with the defaults (lease form), GOMAXPROCS=%d\n\n",
		backend, n, runtime.GOMAXPROCS(0))
	fmt.Fprintln(&sb, "| table | publish | rows | rows/s | drain msgs/s | first tenth | last tenth | last÷first | slowest–fastest tenth | VACUUMs | load |")
	fmt.Fprintln(&sb, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		first, last := r.points[0], r.points[len(r.points)-1]
		fmt.Fprintf(&sb, "| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f–%.0f | %d | %.1f→%.1f |\n", r.t.label, r.t.publish,
			r.rows, r.publishRate, r.drainRate, first, last, last/first, slices.Min(r.points), slices.Max(r.points), r.vacuums, r.loads[0], r.loads[1])
	}
	fmt.Fprintf(&sb, "\nmsgs/s per tenth of the drain (rows drained at its end):\n\n| rows drained |")
	for _, r := range rs {
		fmt.Fprintf(&sb, " %s |", r.t.label)
	}
	fmt.Fprintf(&sb, "\n| ---: |%s\n", strings.Repeat(" ---: |", len(rs)))
	step := n / tenths
	for i := range tenths {
		fmt.Fprintf(&sb, "| %d |", step*(i+1))
		for _, r := range rs {
			fmt.Fprintf(&sb, " %.0f |", r.points[i])
		}
		sb.WriteByte('\n')
	}
	fmt.Fprintf(&sb, "\nMemory of the process while it drains:\n\n")
	fmt.Fprintln(&sb, "| table | peak RSS MiB | allocs/msg | heap after GC at 10% / 90% MiB | heap in use at 10% / 90% MiB | goroutines at 10% / 90% | table size before → after MiB |")
	fmt.Fprintln(&sb, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		fmt.Fprintf(&sb, "| %s | %.1f (%s) | %.1f | %.2f / %.2f | %.2f / %.2f | %d / %d | %.0f → %.0f |\n", r.t.label, r.peakMiB, r.peakHow, r.allocs,
			mib(r.heap[0].HeapAlloc), mib(r.heap[1].HeapAlloc), mib(r.heap[0].HeapInuse), mib(r.heap[1].HeapInuse),
			r.goroutines[0], r.goroutines[1], float64(r.sizeBefore)/(1<<20), float64(r.sizeAfter)/(1<<20))
	}
	fmt.Fprintf(&sb, "\nThe claim's scan (the first 100 ready rows, not taken), median of 5 runs, and the pages one run touches (PostgreSQL):\n\n")
	fmt.Fprintln(&sb, "| table | before the drain | at 10% | at 90% |")
	fmt.Fprintln(&sb, "| --- | ---: | ---: | ---: |")
	for _, r := range rs {
		fmt.Fprintf(&sb, "| %s |", r.t.label)
		for k := range r.probe {
			fmt.Fprintf(&sb, " %.2f ms", float64(r.probe[k].Microseconds())/1000)
			if r.probeBufs[k] > 0 {
				fmt.Fprintf(&sb, ", %d pages", r.probeBufs[k])
			}
			sb.WriteString(" |")
		}
		sb.WriteByte('\n')
	}
	fmt.Print(sb.String()) // b.Log would indent the tables

	for _, r := range rs {
		series := "settle lease, defaults: " + r.t.label
		record(b, Record{Chart: "publish", Backend: backend, Series: r.t.publish + " (" + r.t.label + " table)", Unit: "rows/s", Values: []float64{r.publishRate}})
		for i, p := range r.points {
			record(b, Record{Chart: "backlog drain", Backend: backend, Series: series, XName: "rows drained", X: float64(step * (i + 1)), Unit: "msgs/s", Values: []float64{p}})
		}
		record(b, Record{Chart: "memory", Backend: backend, Series: series + ", peak RSS", Unit: "MiB", Values: []float64{r.peakMiB}})
		record(b, Record{Chart: "allocations", Backend: backend, Series: series, Unit: "allocs/msg", Values: []float64{r.allocs}})
		for k, pct := range []float64{10, 90} {
			record(b, Record{Chart: "heap after GC", Backend: backend, Series: series, XName: "% drained", X: pct, Unit: "MiB", Values: []float64{mib(r.heap[k].HeapAlloc)}})
		}
		m := metricName(strings.ReplaceAll(r.t.label, "+", "and"))
		b.ReportMetric(r.drainRate, m+"-msgs/s")
		b.ReportMetric(r.allocs, m+"-allocs/msg")
	}
}
