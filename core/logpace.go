package core

import (
	"sync"
	"time"
)

// LogPace paces the log lines about something that repeats (failing settlements, refused copies,
// a held key): the first is logged, then at most one line per interval, each saying how many
// occurrences were not logged since the last line. Backends and core share it so that every
// repeated warning keeps one pace and one way of counting. The zero LogPace is ready to use; it is
// safe for concurrent use.
type LogPace struct {
	mu      sync.Mutex
	last    time.Time // when the last line went out
	skipped int       // occurrences since then that were not logged
}

// Allow records one occurrence at now and reports whether to log a line about it (at most one
// per every), and, when it does, how many earlier occurrences were not logged.
func (p *LogPace) Allow(now time.Time, every time.Duration) (log bool, skipped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() && now.Sub(p.last) < every {
		p.skipped++
		return false, 0
	}
	skipped, p.last, p.skipped = p.skipped, now, 0
	return true, skipped
}
