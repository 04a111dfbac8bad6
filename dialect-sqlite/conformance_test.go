package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// rowLockForTest gives the suite's row-lock cases an engine path to run on SQLite. It is
// test-only: SQLite has no row locks, so the claim transaction (BEGIN IMMEDIATE) holds the
// whole database's write lock until its rows settle, which serialises claimants. The package
// itself offers no row-lock constructor.
type rowLockForTest struct{ sqlqueue.Dialect }

func (rowLockForTest) RowLockClaim(s *driver.Schema) (driver.Claim, error) {
	return driver.SelectClaim(s, ""), nil
}

// LockClause and LockTimeout make the test-only row-lock form a driver.RowLocking, so that it
// can count attempts at claim: its transaction holds the whole database, so a SELECT needs no
// clause to lock what it reads, and no row lock is ever waited for.
func (rowLockForTest) LockClause(bool) string                 { return "" }
func (rowLockForTest) LockTimeout(time.Duration, bool) string { return "" }

// Family passes on the family the dialect declares, which the embedded interface hides: the
// engine tells custom events and telemetry the declared family, never the name.
func (rowLockForTest) Family() sqlqueue.Family { return sqlqueue.FamilySQLite }

func openFixture(t *testing.T) *sqlqueuetest.Fixture {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	own := sqlqueuetest.SQLTables{DB: db.Pool(), Dialect: db.Dialect(), ParseTime: ParseTime}
	return &sqlqueuetest.Fixture{
		DB:          db.Queue(),
		Dialect:     db.Dialect(),
		Schema:      "main",
		CreateTable: db.CreateTable,
		Exec:        own.Exec,
		Count:       own.Count,
		Rows:        own.Rows,
		Lease:       func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Lease(db, t, g) },
		Advisory:    func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Advisory(db, t, g) },
		LeakCheck:   leakCheck,
		RowLock: func(t sqlqueue.Table, g string) (core.Endpoint, error) {
			return sqlqueue.NewRowLock(rowLockForTest{db.Dialect()}, db.Queue(), t, g)
		},
	}
}

func TestConformance(t *testing.T) {
	sqlqueuetest.Run(t, openFixture)
}
