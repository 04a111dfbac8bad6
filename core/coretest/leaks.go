package coretest

import "testing"

// LeakCheck checks that an App leaves no goroutines behind. The suites call it just before
// they start an App (or a group of tests) and call the function it returns once the App has
// stopped (the group has finished and its cleanups have run); that function fails t naming
// every goroutine started in between that is still running.
//
// core has no requirements, so it ships no implementation: a backend's tests give one built on
// go.uber.org/goleak, ignoring the goroutines of its client library that legitimately outlive
// an App (a connection pool's health check, a driver's per-connection watcher):
//
//	func leakCheck(t testing.TB) func() {
//		before := goleak.IgnoreCurrent()
//		return func() {
//			t.Helper()
//			if err := goleak.Find(before, goleak.IgnoreTopFunction("…")); err != nil {
//				t.Errorf("goroutines left running: %v", err)
//			}
//		}
//	}
//
// Goroutines are process-wide: a check is only meaningful where nothing else runs at the same
// time, so the suites check around sequential work (each App of transporttest, each parallel
// group of sqlqueuetest as a whole), never inside a parallel subtest.
type LeakCheck func(t testing.TB) (check func())

// Check starts c for t and returns its check; a nil LeakCheck checks nothing.
func (c LeakCheck) Check(t testing.TB) (check func()) {
	if c == nil {
		return func() {}
	}
	t.Helper()
	return c(t)
}
