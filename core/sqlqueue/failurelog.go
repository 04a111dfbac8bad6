package sqlqueue

import (
	"time"

	"github.com/settlehq/settle/core"
)

// FailureLog rate-limits the log lines about a failure that repeats, the way the engine logs
// its failing settlements and lost connections: the first failure is logged, then at most one
// line per FailureLogInterval, each saying how many failures it stands for. Code that runs
// inside a subscription (a custom event, a plugin) uses it so that its lines keep the engine's
// pace. The zero FailureLog is ready to use; it is safe for concurrent use.
type FailureLog struct{ pace core.LogPace }

// Failed records one failure at now. It reports whether to log a line about it, and how many
// failures that line stands for: this one and those not logged since the last line.
func (f *FailureLog) Failed(now time.Time) (count int, log bool) {
	log, skipped := f.pace.Allow(now, FailureLogInterval)
	if !log {
		return 0, false
	}
	return skipped + 1, true
}
