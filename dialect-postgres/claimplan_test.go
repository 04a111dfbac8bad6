package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// readTracer records the statements that scan for ready rows (every one ends in a LIMIT) with
// their arguments, as the engine sent them.
type readTracer struct {
	mu   sync.Mutex
	seen map[string][]any
	sqls []string
}

func (r *readTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.saw(d.SQL, d.Args)
	return ctx
}

func (r *readTracer) saw(sql string, args []any) {
	if strings.Contains(sql, " LIMIT ") && !strings.HasPrefix(sql, "EXPLAIN") {
		r.mu.Lock()
		if _, ok := r.seen[sql]; !ok {
			r.seen[sql] = append([]any(nil), args...)
			r.sqls = append(r.sqls, sql)
		}
		r.mu.Unlock()
	}
}

func (*readTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a batch (a lease pipeline, a row-lock claim sent with its BEGIN) are
// recorded as they are queued.
func (r *readTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		r.saw(q.SQL, q.Arguments)
	}
	return ctx
}

func (*readTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*readTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (r *readTracer) take() ([]string, map[string][]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sqls, seen := r.sqls, r.seen
	r.sqls, r.seen = nil, map[string][]any{}
	return sqls, seen
}

// tracedDB is a DB on e's schema whose pool records the statements that look for ready rows.
func tracedDB(t *testing.T, e *env) (*postgres.DB, *readTracer) {
	t.Helper()
	tr := &readTracer{seen: map[string][]any{}}
	return dbTracedBy(t, e, tr), tr
}

// dbTracedBy is a DB on e's schema whose pool's queries go through tr.
func dbTracedBy(t *testing.T, e *env, tr pgx.QueryTracer) *postgres.DB {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.RuntimeParams["search_path"] = e.schema
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// plan is what EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) says of one statement: the scans of
// the queue table (node type and index) and the shared buffers the whole statement touched.
type plan struct {
	scans   []string
	buffers int64
	text    string
}

func explain(t *testing.T, pool *pgxpool.Pool, table, sql string, args []any, generic bool) plan {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a lease claim stamps its rows: EXPLAIN ANALYZE runs it
	var out []byte
	if generic {
		// The plan a prepared statement settles on after its first executions, whatever
		// the parameters (pgx prepares the engine's statements).
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "PREPARE claimplan AS "+sql); err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
		ph := make([]string, len(args))
		for i := range args {
			ph[i] = fmt.Sprintf("$%d", i+1)
		}
		// The simple protocol spells the arguments into EXECUTE's list as literals.
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE claimplan("+strings.Join(ph, ", ")+")",
			append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&out)
		if err == nil {
			_, err = tx.Exec(ctx, "DEALLOCATE claimplan")
		}
	} else {
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out)
	}
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var doc []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("explain output %s: %v", out, err)
	}
	p := plan{text: string(out)}
	p.buffers = int64(doc[0].Plan["Shared Hit Blocks"].(float64) + doc[0].Plan["Shared Read Blocks"].(float64))
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if typ, _ := n["Node Type"].(string); n["Relation Name"] == table && typ != "ModifyTable" {
			s := typ
			if idx, ok := n["Index Name"].(string); ok {
				s += " using " + idx
			}
			if _, ok := n["Index Cond"]; ok {
				s += " (cond)"
			}
			p.scans = append(p.scans, s)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(doc[0].Plan)
	return p
}

// readsReady reports whether scans read table through its ready index and otherwise look
// rows up by id only (the lease claim's UPDATE of the ids its inner SELECT found).
func readsReady(scans []string, table string) bool {
	ready := false
	for _, s := range scans {
		switch {
		case strings.HasPrefix(s, "Index Scan using "+table+"_ready"):
			ready = true
		case s == "Index Scan using "+table+"_pkey (cond)":
		default:
			return false
		}
	}
	return ready
}

// TestClaimPlanReadyIndex: every statement with which a claim looks for ready rows (the lease
// claim and its lapsed-row probe, the row-lock claim and its counting select, the advisory
// candidates) reads the ready index, and its cost does not grow with the processed rows and
// dead letters in front of the ready ones. Without a hint, PostgreSQL's planner reads them
// in id order through the primary key whenever its statistics say most rows are ready (taken
// before the rows were processed), or that the dead letters are few and spread out, and the
// claim then walks over every processed row and dead letter in front (issue 21's backlog
// benchmark: 44.7 ms and 66,837 pages a claim at 10% of a processed_at drain, 18 ms and
// 5,226 pages at 90% of a drain behind 100,000 dead letters).
func TestClaimPlanReadyIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tables of 220,000 rows")
	}
	e := setup(t)
	ctx := context.Background()
	db, tr := tracedDB(t, e)

	// Blocks of 1000 dead letters after every 10,000 live rows, as bench/backlog_test.go
	// writes them: 200,000 live rows and 20,000 dead letters, then 1000 ready rows.
	const fill = `INSERT INTO %s (payload, grp, attempt) SELECT '\x7b7d'::bytea,
		CASE WHEN (g - 1) %% 11000 >= 10000 THEN 'q.dead' ELSE 'q' END,
		CASE WHEN (g - 1) %% 11000 >= 10000 THEN 5 ELSE 0 END
		FROM generate_series(1, 221000) g`
	withDone := sqlqueue.StandardTable("done_jobs")
	withDead := sqlqueue.StandardTable("dead_jobs")
	withDead.Columns.ProcessedAt = ""
	for _, tb := range []sqlqueue.Table{withDone, withDead} {
		if err := db.CreateTable(ctx, tb); err != nil {
			t.Fatal(err)
		}
		e.exec(`ALTER TABLE ` + tb.Name + ` SET (autovacuum_enabled = off)`)
		e.exec(fmt.Sprintf(fill, tb.Name))
	}
	e.exec(`UPDATE dead_jobs SET grp = 'q' WHERE id > 220000`)
	// processed_at: the statistics were taken while every row was ready, then the first
	// 200,000 were processed (a drain before autovacuum's next ANALYZE).
	e.exec(`ANALYZE done_jobs`)
	e.exec(`UPDATE done_jobs SET processed_at = now() WHERE id <= 220000 AND grp = 'q'`)
	e.exec(`VACUUM done_jobs`)
	// delete + dead letters: 90% drained, with fresh statistics: 18,000 dead letters in front
	// of the last 20,000 live rows (and the last 2000 dead letters between them).
	e.exec(`DELETE FROM dead_jobs WHERE id <= 198000 AND grp = 'q'`)
	e.exec(`VACUUM ANALYZE dead_jobs`)

	for _, tb := range []sqlqueue.Table{withDone, withDead} {
		for _, f := range append(forms, form{"rowlock_uncounted", postgres.RowLock}) {
			t.Run(tb.Name+"/"+f.name, func(t *testing.T) {
				ep, err := f.ep(db, tb, "q")
				if err != nil {
					t.Fatal(err)
				}
				settled := make(chan struct{}, 1000)
				a := core.New(core.WithoutSignals(), core.WithShutdownTimeout(10*time.Second), core.WithLogger(testLogger()),
					core.WithObserver(func(core.Settlement) {
						select {
						case settled <- struct{}{}:
						default:
						}
					}))
				a.Register(db)
				// The cap makes the row-lock form count its attempts at claim while its claims
				// are small (its counting select); without it the row-lock claim is one SELECT.
				opts := []core.Option{core.Workers(2)}
				if f.name != "rowlock_uncounted" {
					opts = append(opts, core.DeadLetterAfter(5, "q.dead"))
				}
				if err := core.Subscribe(a, ep, func(context.Context, *core.Message[json.RawMessage]) error { return nil }, opts...); err != nil {
					t.Fatal(err)
				}
				runUntilSettled(t, a, settled, 5)
				sqls, args := tr.take()
				var claims int
				for _, sql := range sqls {
					if !strings.Contains(sql, `"`+tb.Name+`"`) {
						continue
					}
					for _, generic := range []bool{false, true} {
						p := explain(t, e.pool, tb.Name, sql, args[sql], generic)
						t.Logf("generic %v: %d buffers, %v: %s", generic, p.buffers, p.scans, sql)
						if strings.Contains(sql, `"locked_until" IS NOT NULL`) {
							// A look for lapsed rows (rescues) searches for rows its statistics
							// say are rare, once every few seconds at most: the planner may scan
							// the table or a bitmap of the ready index; only the walk in id
							// order through the primary key is ruled out.
							if slices.Contains(p.scans, "Index Scan using "+tb.Name+"_pkey") {
								t.Errorf("generic plan %v: the look for lapsed rows reads the table by %v:\n%s", generic, p.scans, sql)
							}
							continue
						}
						claims++
						if !readsReady(p.scans, tb.Name) {
							t.Errorf("generic plan %v: the statement reads the table by %v, not by its ready index:\n%s", generic, p.scans, sql)
						}
						// The rows its own subscription settled just before are all it passes
						// over: a walk through the processed rows touches over 3000. Alone on
						// the server it touches under 400; another session's open snapshot
						// keeps the index entries of those settled rows from being marked
						// dead, and then it visited 915 once, hence the bound between.
						if p.buffers > 1500 {
							t.Errorf("generic plan %v: the statement touched %d buffers (at most 1500 expected; a walk through the processed rows touches over 3000):\n%s", generic, p.buffers, sql)
						}
					}
				}
				if claims == 0 {
					t.Fatal("no claim statement seen")
				}
			})
		}
	}
}

// TestClaimGroupOrderNeedsIndex: the claims compare the group as a range and order by (group,
// id) only where an index every claim can use starts with the group and id columns; otherwise
// they keep group = $n ORDER BY id, which the primary key serves without a sort.
func TestClaimGroupOrderNeedsIndex(t *testing.T) {
	for _, c := range []struct {
		name, index string
		ranged      bool
	}{
		{"ddl", "", true},
		{"none", "-", false},
		{"no_predicate", "CREATE INDEX ON jobs (grp, id, created_at)", true},
		{"other_predicate", "CREATE INDEX ON jobs (grp, id) WHERE attempt < 5", false},
		{"pattern_ops", "CREATE INDEX ON jobs (grp text_pattern_ops, id) WHERE processed_at IS NULL", false},
		{"descending", "CREATE INDEX ON jobs (grp DESC, id) WHERE processed_at IS NULL", false},
		{"id_first", "CREATE INDEX ON jobs (id, grp) WHERE processed_at IS NULL", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			db, tr := tracedDB(t, e)
			tb := sqlqueue.StandardTable("jobs")
			if err := db.CreateTable(context.Background(), tb); err != nil {
				t.Fatal(err)
			}
			if c.index != "" {
				e.exec(`DROP INDEX jobs_ready`)
				if c.index != "-" {
					e.exec(c.index)
				}
			}
			e.exec(`INSERT INTO jobs (payload, grp) SELECT '{}', 'q' FROM generate_series(1, 3)`)
			ep, err := postgres.Lease(db, tb, "q")
			if err != nil {
				t.Fatal(err)
			}
			settled := make(chan struct{}, 10)
			warned := &warnings{}
			a := core.New(core.WithoutSignals(), core.WithLogger(slog.New(warned)),
				core.WithObserver(func(core.Settlement) { settled <- struct{}{} }))
			a.Register(db)
			if err := core.Subscribe(a, ep, func(context.Context, *core.Message[json.RawMessage]) error { return nil }); err != nil {
				t.Fatal(err)
			}
			runUntilSettled(t, a, settled, 3)
			sqls, _ := tr.take()
			var claims int
			for _, sql := range sqls {
				if !strings.HasPrefix(sql, "UPDATE") {
					continue
				}
				claims++
				ranged := strings.Contains(sql, `"grp" >= $2 AND "grp" <= $3`) && strings.Contains(sql, `ORDER BY "grp", "id"`)
				plain := strings.Contains(sql, `"grp" = $2`) && strings.Contains(sql, `ORDER BY "id"`)
				if ranged != c.ranged || plain == c.ranged {
					t.Errorf("claim (range and group order expected: %v):\n%s", c.ranged, sql)
				}
			}
			if claims == 0 {
				t.Fatal("no claim seen")
			}
			// Without the index the subscription's own log says so (the dialect's logger
			// discards by default).
			if got := warned.has("no index of the queue table starts with its group and id columns"); got == c.ranged {
				t.Errorf("subscription warned of the missing index: %v, want %v", got, !c.ranged)
			}
		})
	}
}

// warnings is a slog.Handler that keeps the messages of warnings and errors.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) has(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// runUntilSettled runs a until settled has signalled n settlements, then stops it.
func runUntilSettled(t *testing.T, a *core.App, settled <-chan struct{}, n int) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	for range n {
		select {
		case <-settled:
		case <-time.After(waitTimeout):
			cancel()
			<-done
			t.Fatal("no settlement")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
