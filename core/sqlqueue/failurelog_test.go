package sqlqueue

import (
	"testing"
	"time"
)

// FailureLog lets the first failure through, then one per FailureLogInterval, each line
// counting the failures it stands for.
func TestFailureLog(t *testing.T) {
	t.Parallel()
	var f FailureLog
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at    time.Duration
		count int
		log   bool
	}
	for i, s := range []step{
		{0, 1, true},
		{time.Second, 0, false},
		{FailureLogInterval - time.Nanosecond, 0, false},
		{FailureLogInterval, 3, true},
		{FailureLogInterval + time.Second, 0, false},
		{3 * FailureLogInterval, 2, true},
		{3 * FailureLogInterval, 0, false},
	} {
		count, log := f.Failed(start.Add(s.at))
		if count != s.count || log != s.log {
			t.Fatalf("failure %d at +%v: (%d, %v), want (%d, %v)", i, s.at, count, log, s.count, s.log)
		}
	}
}
