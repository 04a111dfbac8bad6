package postgres_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestTransportConformance runs the outcome suite every backend runs (core/transporttest) on
// the real PostgreSQL, in the lease, row-lock and advisory forms, on a grouped table and on a
// table per queue, each test on a schema of its own.
func TestTransportConformance(t *testing.T) {
	sqlqueuetest.RunTransport(t, fixture)
}

// leakCheck is the suites' goroutine check (coretest.LeakCheck) on go.uber.org/goleak: every
// goroutine started after it is called must have ended once the App (or the group of tests)
// has stopped.
func leakCheck(t testing.TB) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left running: %v", err)
		}
	}
}
