package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// rowLockForTest gives the suite's row-lock cases an engine path to run on SQLite. It is
// test-only: SQLite has no row locks, so the claim transaction (BEGIN IMMEDIATE) holds the
// whole database's write lock until its rows settle, which serialises claimants. The package
// itself offers no row-lock constructor.
type rowLockForTest struct{ sqlqueue.Dialect }

func (rowLockForTest) RowLockClaim(s *sqlqueue.Schema) (sqlqueue.Claim, error) {
	return sqlqueue.SelectClaim(s, ""), nil
}

// LockClause and LockTimeout make the test-only row-lock form a sqlqueue.RowLocking, so that it
// can count attempts at claim: its transaction holds the whole database, so a SELECT needs no
// clause to lock what it reads, and no row lock is ever waited for.
func (rowLockForTest) LockClause(bool) string                 { return "" }
func (rowLockForTest) LockTimeout(time.Duration, bool) string { return "" }

func openFixture(t *testing.T) *sqlqueuetest.Fixture {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &sqlqueuetest.Fixture{
		DB:          db.Queue(),
		Dialect:     db.Dialect(),
		Schema:      "main",
		CreateTable: db.CreateTable,
		Exec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.Pool().ExecContext(ctx, q, args...)
			return err
		},
		Count: func(ctx context.Context, table string) (int, error) {
			var n int
			err := db.Pool().QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+table+`"`).Scan(&n)
			return n, err
		},
		Rows: func(ctx context.Context, t sqlqueue.Table) ([]sqlqueuetest.Row, error) {
			return readRows(ctx, db.Pool(), t)
		},
		Lease:     func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Lease(db, t, g) },
		Advisory:  func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Advisory(db, t, g) },
		LeakCheck: leakCheck,
		RowLock: func(t sqlqueue.Table, g string) (core.Endpoint, error) {
			return sqlqueue.NewRowLock(rowLockForTest{db.Dialect()}, db.Queue(), t, g)
		},
	}
}

// readRows reads a queue table with database/sql, as a user of go-sqlite3 would.
func readRows(ctx context.Context, db *sql.DB, t sqlqueue.Table) ([]sqlqueuetest.Row, error) {
	c := t.Columns
	col := func(name, zero string) string {
		if name == "" {
			return zero
		}
		return `"` + name + `"`
	}
	id, payload := c.ID, c.Payload
	if id == "" {
		id = "id"
	}
	if payload == "" {
		payload = "payload"
	}
	q := "SELECT " + col(id, "") + ", " + col(payload, "") + ", " + col(c.Group, "''") + ", " + col(c.Attempt, "0") + ", " +
		col(c.RetryAfter, "NULL") + ", " + col(c.LockedUntil, "NULL") + ", " + col(c.ProcessedAt, "NULL") + ", " +
		col(c.Headers, "NULL") + ", " + col(c.LastError, "NULL") + ` FROM "` + t.Name + `" ORDER BY ` + col(id, "")
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlqueuetest.Row
	for rows.Next() {
		var r sqlqueuetest.Row
		var ra, lu, pa sql.NullString
		var lastError sql.NullString
		if err := rows.Scan(&r.ID, &r.Payload, &r.Group, &r.Attempt, &ra, &lu, &pa, &r.Headers, &lastError); err != nil {
			return nil, err
		}
		r.LastError = lastError.String
		for _, x := range []struct {
			s   sql.NullString
			dst **time.Time
		}{{ra, &r.RetryAfter}, {lu, &r.LockedUntil}, {pa, &r.ProcessedAt}} {
			if x.s.Valid {
				tm, err := ParseTime(x.s.String)
				if err != nil {
					return nil, err
				}
				*x.dst = &tm
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func TestConformance(t *testing.T) {
	sqlqueuetest.Run(t, openFixture)
}
