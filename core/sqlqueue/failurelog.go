package sqlqueue

import (
	"sync"
	"time"
)

// FailureLog rate-limits the log lines about a failure that repeats, the way the engine logs
// its failing settlements and lost connections: the first failure is logged, then at most one
// line per FailureLogInterval, each saying how many failures it stands for. Code that runs
// inside a subscription (a custom event, a plugin) uses it so that its lines keep the engine's
// pace. The zero FailureLog is ready to use; it is safe for concurrent use.
type FailureLog struct {
	mu     sync.Mutex
	count  int       // failures since the last line
	logged time.Time // when the last line went out
}

// Failed records one failure at now. It reports whether to log a line about it, and how many
// failures that line stands for: this one and those not logged since the last line.
func (f *FailureLog) Failed(now time.Time) (count int, log bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	if !f.logged.IsZero() && now.Sub(f.logged) < FailureLogInterval {
		return 0, false
	}
	count, f.count, f.logged = f.count, 0, now
	return count, true
}
