package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// The pipeline the lease form settles and claims with: one round trip, one transaction, and a
// step that changes another number of rows than it wants rolls every step back.
func TestPipeline(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE p (id bigint PRIMARY KEY, v int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO p SELECT g, 0 FROM generate_series(1, 5) g`); err != nil {
		t.Fatal(err)
	}
	pl, ok := e.db.Queue().(driver.Pipeliner)
	if !ok {
		t.Fatal("the PostgreSQL DB is not a driver.Pipeliner")
	}
	sum := func() (n int) {
		t.Helper()
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(v), 0) + 100 * count(*) FROM p`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var read []int64
	readIDs := func(rows sqlqueue.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			read = append(read, id)
		}
		return rows.Err()
	}

	// Every count matches: both changes commit and the query's rows are read.
	err := pl.Pipeline(ctx, []driver.Step{
		{SQL: `DELETE FROM p WHERE id IN ($1, $2)`, Args: []any{int64(1), int64(2)}, Want: 2},
		{SQL: `UPDATE p SET v = v + 1 WHERE id >= $1 RETURNING id`, Args: []any{int64(4)}, Rows: readIDs},
		{SQL: `UPDATE p SET v = v + 10 WHERE id = $1`, Args: []any{int64(3)}},
	})
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if len(read) != 2 {
		t.Errorf("rows read = %v; want ids 4 and 5", read)
	}
	if got := sum(); got != 3*100+1+1+10 {
		t.Fatalf("after the pipeline: %d; want 312 (rows 3, 4, 5 with v 10, 1, 1)", got)
	}

	// The second step names a row that is gone: nothing commits, not even the first step.
	read = nil
	err = pl.Pipeline(ctx, []driver.Step{
		{SQL: `UPDATE p SET v = v + 1000 WHERE id = $1`, Args: []any{int64(3)}, Want: 1},
		{SQL: `DELETE FROM p WHERE id IN ($1, $2)`, Args: []any{int64(1), int64(4)}, Want: 2},
		{SQL: `UPDATE p SET v = v + 1 RETURNING id`, Rows: readIDs},
	})
	if !errors.Is(err, driver.ErrRowCount) {
		t.Fatalf("a step matching 1 row of 2: err = %v; want ErrRowCount", err)
	}
	if got := sum(); got != 312 {
		t.Errorf("after the refused pipeline: %d; want 312 (nothing committed)", got)
	}

	// A statement that fails rolls back too, and its error is returned as it is.
	err = pl.Pipeline(ctx, []driver.Step{
		{SQL: `DELETE FROM p WHERE id = $1`, Args: []any{int64(3)}, Want: 1},
		{SQL: `UPDATE no_such_table SET v = 1`},
	})
	if err == nil || errors.Is(err, driver.ErrRowCount) {
		t.Fatalf("a failing statement: err = %v; want the server's error", err)
	}
	if got := sum(); got != 312 {
		t.Errorf("after the failed pipeline: %d; want 312 (nothing committed)", got)
	}
}
