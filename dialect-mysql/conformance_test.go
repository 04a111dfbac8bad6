package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// fixture opens a DB on a fresh database of s for one conformance test. With flavour set, the
// DB spells its statements as that flavour does whatever the server is: MySQL's statement set
// (no RETURNING: Publish reads LAST_INSERT_ID()) is valid SQL on MariaDB too, so it runs here
// even without a MySQL server.
func fixture(s testServer, flavour Flavour) sqlqueuetest.Open {
	return func(t *testing.T) *sqlqueuetest.Fixture {
		db := openDB(t, s)
		if flavour != 0 {
			db.dialect = newDialect(flavour, nil)
		}
		pool := db.Pool()
		return &sqlqueuetest.Fixture{
			DB:          db.Queue(),
			Dialect:     db.Dialect(),
			Schema:      db.Database(),
			CreateTable: db.CreateTable,
			Exec: func(ctx context.Context, q string, args ...any) error {
				_, err := pool.ExecContext(ctx, q, args...)
				return err
			},
			Count: func(ctx context.Context, table string) (int, error) {
				var n int
				err := pool.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quote(table)).Scan(&n)
				return n, err
			},
			Rows:      func(ctx context.Context, t sqlqueue.Table) ([]sqlqueuetest.Row, error) { return readRows(ctx, pool, t) },
			Lease:     func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Lease(db, t, g) },
			RowLock:   func(t sqlqueue.Table, g string) (core.Endpoint, error) { return RowLock(db, t, g) },
			Advisory:  func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Advisory(db, t, g) },
			LeakCheck: leakCheck,
		}
	}
}

// readRows reads a queue table with database/sql and go-sql-driver/mysql (parseTime=true), as
// a user would.
func readRows(ctx context.Context, db *sql.DB, t sqlqueue.Table) ([]sqlqueuetest.Row, error) {
	c := t.Columns
	col := func(name, zero string) string {
		if name == "" {
			return zero
		}
		return quote(name)
	}
	if c.ID == "" {
		c.ID = "id"
	}
	if c.Payload == "" {
		c.Payload = "payload"
	}
	q := "SELECT " + col(c.ID, "") + ", " + col(c.Payload, "") + ", " + col(c.Group, "''") + ", " + col(c.Attempt, "0") + ", " +
		col(c.RetryAfter, "NULL") + ", " + col(c.LockedUntil, "NULL") + ", " + col(c.ProcessedAt, "NULL") + ", " +
		col(c.Headers, "NULL") + ", " + col(c.LastError, "NULL") + " FROM " + quote(t.Name) + " ORDER BY " + col(c.ID, "")
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlqueuetest.Row
	for rows.Next() {
		var r sqlqueuetest.Row
		var ra, lu, pa sql.NullTime
		var lastError sql.NullString
		if err := rows.Scan(&r.ID, &r.Payload, &r.Group, &r.Attempt, &ra, &lu, &pa, &r.Headers, &lastError); err != nil {
			return nil, err
		}
		r.LastError = lastError.String
		for _, x := range []struct {
			t   sql.NullTime
			dst **time.Time
		}{{ra, &r.RetryAfter}, {lu, &r.LockedUntil}, {pa, &r.ProcessedAt}} {
			if x.t.Valid {
				tm := x.t.Time
				*x.dst = &tm
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// TestConformance runs the whole sqlqueuetest suite on MariaDB, and on MySQL 8 when
// SETTLE_TEST_MYSQL_URL names one.
func TestConformance(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		sqlqueuetest.Run(t, fixture(s, 0))
	})
}

// TestConformanceMySQLFlavourOnMariaDB runs the suite on MariaDB with the MySQL flavour's
// statement set, so that both statement sets run even where no MySQL server is installed.
func TestConformanceMySQLFlavourOnMariaDB(t *testing.T) {
	sqlqueuetest.Run(t, fixture(mariadbServer(t), MySQL))
}
