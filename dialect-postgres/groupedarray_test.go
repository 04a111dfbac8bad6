package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// stmtTracer records every statement a pool runs, with its number of arguments.
type stmtTracer struct {
	mu    sync.Mutex
	stmts []tracedStmt
}

type tracedStmt struct {
	sql  string
	args []any
}

func (s *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	s.stmts = append(s.stmts, tracedStmt{sql: d.SQL, args: d.Args})
	s.mu.Unlock()
	return ctx
}

func (s *stmtTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a batch (a row-lock claim sent with its BEGIN, a settlement with its
// COMMIT) are recorded as they are queued.
func (s *stmtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	for _, q := range d.Batch.QueuedQueries {
		s.stmts = append(s.stmts, tracedStmt{sql: q.SQL, args: q.Arguments})
	}
	s.mu.Unlock()
	return ctx
}

func (*stmtTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*stmtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A row-lock claim's acks settle with one statement that takes the claim's ids as one bigint[]
// argument (= ANY($1)), not one argument per row: the server binds one value. With processed_at
// the statement marks the rows instead of deleting them. The engine's claim holds every row it
// names locked, so the statement goes with the COMMIT as it is, its row count not checked on the
// server.
func TestRowLockSettlesByIDArray(t *testing.T) {
	for _, c := range []struct {
		name  string
		table sqlqueue.Table
		group string
		verb  string
		args  int
	}{
		{"delete", plainTable("jobs"), "", "DELETE", 1},
		{"processed_at", sqlqueue.StandardTable("jobs"), "q", "UPDATE", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			stmts := drainRowLockTraced(t, c.table, c.group, sqlqueue.BatchSize(50))
			var settles, ids int
			for _, s := range stmts {
				if strings.HasPrefix(s.sql, "WITH settle_step AS (") && strings.Contains(s.sql, "jobs") {
					t.Errorf("grouped settlement %q checks its row count on the server; the claim's lock holds its rows", s.sql)
					continue
				}
				if !strings.HasPrefix(s.sql, c.verb) || !strings.Contains(s.sql, "jobs") {
					continue
				}
				if !strings.Contains(s.sql, "= ANY($1)") || len(s.args) != c.args {
					t.Errorf("grouped settlement %q with %d arguments; want … = ANY($1) with %d", s.sql, len(s.args), c.args)
					continue
				}
				arr, ok := s.args[0].([]int64)
				if !ok {
					t.Fatalf("first argument %T; want []int64", s.args[0])
				}
				settles++
				ids += len(arr)
			}
			if ids != rowLockTraced || settles < 3 {
				t.Errorf("%d grouped settlements of %d ids; want every one of the %d rows, in one statement per claim (the claims ramp: at least 3)", settles, ids, rowLockTraced)
			}
		})
	}
}

// A service's own claim (EventClaim) need not lock the rows it returns, so another session may
// have deleted one before the claim settles: the grouped settlement that goes with the COMMIT
// keeps its row count checked on the server (WITH settle_step AS (DELETE … RETURNING 1) …), and a
// short count rolls the claim back.
func TestRowLockCustomClaimChecksCount(t *testing.T) {
	claim := func(_ context.Context, in sqlqueue.EventInput) ([]sqlqueue.Statement, error) {
		return []sqlqueue.Statement{{SQL: `SELECT id, payload, attempt + 1, headers FROM jobs ORDER BY id LIMIT $1`, Args: []any{in.Limit}}}, nil
	}
	stmts := drainRowLockTraced(t, plainTable("jobs"), "", sqlqueue.BatchSize(50), sqlqueue.OnEvent(sqlqueue.EventClaim, claim))
	var checked, ids int
	for _, s := range stmts {
		if !strings.Contains(s.sql, "DELETE FROM") || !strings.Contains(s.sql, "jobs") {
			continue
		}
		if !strings.HasPrefix(s.sql, "WITH settle_step AS (") {
			t.Errorf("grouped settlement %q of a custom claim goes with its COMMIT unchecked", s.sql)
			continue
		}
		checked++
		ids += len(s.args[0].([]int64))
	}
	if ids != rowLockTraced || checked < 3 {
		t.Errorf("%d checked settlements of %d ids; want every one of the %d rows", checked, ids, rowLockTraced)
	}
}

const rowLockTraced = 120

// drainRowLockTraced settles rowLockTraced rows of table t (ready in group) through a row-lock
// subscription with opts, and returns the statements its pool sent.
func drainRowLockTraced(t *testing.T, table sqlqueue.Table, group string, opts ...core.Option) []tracedStmt {
	t.Helper()
	const n = rowLockTraced
	e := setup(t)
	tr := &stmtTracer{}
	db := dbTracedBy(t, e, tr)
	if err := db.CreateTable(context.Background(), table); err != nil {
		t.Fatal(err)
	}
	if group == "" {
		e.exec(`INSERT INTO jobs (payload) SELECT '{}' FROM generate_series(1, 120)`)
	} else {
		e.exec(`INSERT INTO jobs (payload, grp) SELECT '{}', 'q' FROM generate_series(1, 120)`)
	}
	ep, err := postgres.RowLock(db, table, group)
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan core.Settlement, n)
	a := core.New(core.WithoutSignals(), core.WithLogger(testLogger()),
		core.WithObserver(func(s core.Settlement) { settled <- s }))
	a.Register(db)
	if err := core.Subscribe(a, ep, func(context.Context, *core.Message[json.RawMessage]) error { return nil }, opts...); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	for range n {
		select {
		case s := <-settled:
			if s.Err != nil {
				t.Fatalf("settlement: %v", s.Err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("no settlement")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := 0
	if group != "" {
		want = e.count(`SELECT count(*) FROM jobs WHERE processed_at IS NOT NULL`)
	} else {
		want = n - e.count(`SELECT count(*) FROM jobs`)
	}
	if want != n {
		t.Fatalf("%d of %d rows settled in the table", want, n)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.stmts)
}
