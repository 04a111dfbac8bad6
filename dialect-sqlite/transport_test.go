package sqlite

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestTransportConformance runs the outcome suite every backend runs (core/transporttest) on
// SQLite, in the lease and advisory forms, on a grouped table and on a table per queue. The
// test-only row-lock path of TestConformance is left out: SQLite offers no row-lock form.
func TestTransportConformance(t *testing.T) {
	sqlqueuetest.RunTransport(t, func(t *testing.T) *sqlqueuetest.Fixture {
		f := openFixture(t)
		f.RowLock = nil
		return f
	})
}

// leakCheck is the suites' goroutine check (coretest.LeakCheck) on go.uber.org/goleak: every
// goroutine started after it is called must have ended once the App (or the group of tests)
// has stopped. go-sqlite3 and database/sql start none that outlive a closed DB.
func leakCheck(t testing.TB) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left running: %v", err)
		}
	}
}
