package sqlitepure

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
	"go.uber.org/goleak"
)

// rowLockForTest gives the suite's row-lock cases an engine path to run on SQLite. It is
// test-only: SQLite has no row locks, so the claim transaction (BEGIN IMMEDIATE) holds the
// whole database's write lock until its rows settle, which serialises claimants; the dialect
// declares driver.SingleWriter, so the suite runs those cases with one worker. The package
// itself offers no row-lock constructor.
type rowLockForTest struct{ *dialect }

func (rowLockForTest) RowLockClaim(s *driver.Schema) (driver.Claim, error) {
	return driver.SelectClaim(s, ""), nil
}

// LockClause and LockTimeout make the test-only row-lock form a driver.RowLocking, so that it
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
		RowLock: func(t sqlqueue.Table, g string) (core.Endpoint, error) {
			return sqlqueue.NewRowLock(rowLockForTest{db.dialect}, db.Queue(), t, g)
		},
		LeakCheck: leakCheck,
	}
}

// TestConformance runs the SQL queue suite (sqlqueuetest): every outcome in the lease and
// advisory forms (and the test-only row-lock path), over several table shapes, transactional
// mode off and on, read back with database/sql.
func TestConformance(t *testing.T) {
	sqlqueuetest.Run(t, openFixture)
}

// TestOps runs the operations suite (stats, list, show, redrive, purge).
func TestOps(t *testing.T) {
	sqlqueuetest.RunOps(t, openFixture)
}

// TestTransportConformance runs the outcome suite every backend runs (core/transporttest), in
// the lease and advisory forms, on a grouped table and on a table per queue.
func TestTransportConformance(t *testing.T) {
	sqlqueuetest.RunTransport(t, func(t *testing.T) *sqlqueuetest.Fixture {
		f := openFixture(t)
		f.RowLock = nil
		return f
	})
}

// leakCheck is the suites' goroutine check (coretest.LeakCheck) on go.uber.org/goleak.
func leakCheck(t testing.TB) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left running: %v", err)
		}
	}
}
