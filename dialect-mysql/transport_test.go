package mysql

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestTransportConformance runs the outcome suite every backend runs (core/transporttest) on
// MariaDB (and on MySQL 8 when SETTLE_TEST_MYSQL_URL names one), in the lease, row-lock and
// advisory forms, on a grouped table and on a table per queue, each test on a database of its
// own.
func TestTransportConformance(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		sqlqueuetest.RunTransport(t, fixture(s, 0))
	})
}

// leakCheck is the suites' goroutine check (coretest.LeakCheck) on go.uber.org/goleak: every
// goroutine started after it is called must have ended once the App (or the group of tests)
// has stopped.
func leakCheck(t testing.TB) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		// go-sql-driver/mysql watches each pooled connection in a goroutine of its own, which
		// lives as long as the connection stays in the pool (a closed DB ends it).
		if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1")); err != nil {
			t.Errorf("goroutines left running: %v", err)
		}
	}
}
