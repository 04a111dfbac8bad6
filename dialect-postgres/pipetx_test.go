package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// tripTracer records every round trip a pool makes: a statement of its own, or a batch (its
// statements joined by " | ").
type tripTracer struct {
	mu    sync.Mutex
	trips []string
}

func (r *tripTracer) add(s string) {
	r.mu.Lock()
	r.trips = append(r.trips, s)
	r.mu.Unlock()
}

func (r *tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}

func (*tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	r.add(strings.Join(sqls, " | "))
	return ctx
}

func (*tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (r *tripTracer) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.trips
	r.trips = nil
	return t
}

// A row-lock claim outside transactional mode costs two round trips: its BEGIN goes with the
// claim's SELECT, and its grouped settlement with its COMMIT.
// No BEGIN or COMMIT travels alone.
func TestRowLockClaimTwoRoundTrips(t *testing.T) {
	e := setup(t)
	tr := &tripTracer{}
	db := dbTracedBy(t, e, tr)
	tb := plainTable("jobs")
	if err := db.CreateTable(context.Background(), tb); err != nil {
		t.Fatal(err)
	}
	const n = 120
	e.exec(`INSERT INTO jobs (payload) SELECT '{}' FROM generate_series(1, 120)`)
	ep, err := postgres.RowLock(db, tb, "")
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan struct{}, n)
	a := core.New(core.WithoutSignals(), core.WithLogger(testLogger()),
		core.WithObserver(func(s core.Settlement) {
			if s.Err != nil {
				t.Errorf("settlement: %v", s.Err)
			}
			settled <- struct{}{}
		}))
	a.Register(db)
	if err := core.Subscribe(a, ep, func(context.Context, *core.Message[json.RawMessage]) error { return nil },
		sqlqueue.BatchSize(50)); err != nil {
		t.Fatal(err)
	}
	runUntilSettled(t, a, settled, n)
	if left := e.count(`SELECT count(*) FROM jobs`); left != 0 {
		t.Fatalf("%d rows left", left)
	}
	var claims, settles int
	for _, trip := range tr.take() {
		switch {
		case trip == "begin" || trip == "commit":
			t.Errorf("%s sent in a round trip of its own", trip)
		case strings.HasPrefix(trip, "begin | SELECT") && strings.Contains(trip, "FOR UPDATE SKIP LOCKED"):
			claims++
		case strings.HasPrefix(trip, "DELETE FROM") && strings.HasSuffix(trip, " | commit"):
			settles++
		}
	}
	// 1, 2, 4, 8, 16, 32, 50 and the last 7: eight claims with rows, and those that found none.
	if settles != 8 || claims < settles {
		t.Errorf("%d claims and %d settlements with their commit; want 8 settlements, each after its claim", claims, settles)
	}
}

func pipelined(t *testing.T, e *env) (driver.PipelinedTx, driver.TxPipeliner) {
	t.Helper()
	tp, ok := e.db.Queue().(driver.TxPipeliner)
	if !ok {
		t.Fatal("the DB's queue surface is not a TxPipeliner")
	}
	tx, err := tp.BeginPipelined(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx, tp
}

// A settlement that matches another number of rows than it wants is rolled back, with COMMIT
// skipped, and reported as ErrRowCount; the rows stay, and the connection goes back clean.
func TestPipelinedTxRowCountRollsBack(t *testing.T) {
	e := setup(t)
	e.exec(`CREATE TABLE t (id bigint PRIMARY KEY)`)
	e.exec(`INSERT INTO t SELECT generate_series(1, 3)`)
	ctx := context.Background()
	tx, _ := pipelined(t, e)
	rows, err := tx.Query(ctx, `SELECT id FROM t ORDER BY id FOR UPDATE`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("read %v; want 3 ids", ids)
	}
	err = tx.CommitWith(ctx, driver.Step{SQL: `DELETE FROM t WHERE id = ANY($1)`, Args: []any{ids}, Want: 4})
	if !errors.Is(err, driver.ErrRowCount) {
		t.Fatalf("CommitWith: %v; want ErrRowCount", err)
	}
	if n := e.count(`SELECT count(*) FROM t`); n != 3 {
		t.Fatalf("%d rows left; want 3 (rolled back)", n)
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("Commit after CommitWith: %v; want pgx.ErrTxClosed", err)
	}
	// The count matches: deleted and committed, BEGIN sent with the statement.
	tx, _ = pipelined(t, e)
	if err := tx.CommitWith(ctx, driver.Step{SQL: `DELETE FROM t WHERE id = ANY($1)`, Args: []any{ids}, Want: 3}); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM t`); n != 0 {
		t.Fatalf("%d rows left; want 0", n)
	}
}

// A statement that fails in the first batch leaves the transaction aborted: Commit reports it
// (the server rolls back), and the connection goes back to the pool out of any transaction.
// A transaction that ran nothing sends nothing.
func TestPipelinedTxFailures(t *testing.T) {
	e := setup(t)
	e.exec(`CREATE TABLE t (id bigint PRIMARY KEY)`)
	ctx := context.Background()

	tx, _ := pipelined(t, e)
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err == nil {
		t.Fatal("duplicate key accepted")
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("Commit of an aborted transaction: %v; want pgx.ErrTxCommitRollback", err)
	}
	if n := e.count(`SELECT count(*) FROM t`); n != 0 {
		t.Fatalf("%d rows; want 0", n)
	}

	tx, _ = pipelined(t, e)
	if _, err := tx.Query(ctx, `SELECT no_such_column FROM t`); err == nil {
		t.Fatal("a bad first statement succeeded")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("second Rollback: %v; want pgx.ErrTxClosed", err)
	}

	// The first statement's rows are read before the next statement runs on the connection.
	tx, _ = pipelined(t, e)
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.CommitWith(ctx, driver.Step{SQL: `UPDATE t SET id = id + 10`, Want: 2}); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM t WHERE id > 10`); n != 2 {
		t.Fatalf("%d rows updated; want 2", n)
	}

	for _, end := range []string{"commit", "rollback"} {
		tr := &tripTracer{}
		db := dbTracedBy(t, e, tr)
		tx, err := db.Queue().(driver.TxPipeliner).BeginPipelined(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if end == "commit" {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if trips := tr.take(); len(trips) != 0 {
			t.Errorf("a transaction that ran nothing sent %q at its %s", trips, end)
		}
	}
	// Every transaction ended on the server before its connection went back (the cleanup
	// checks that none is still lent out).
	if n := e.count(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, e.schema); n != 0 {
		t.Fatalf("%d connections left idle in a transaction", n)
	}
}
