package core_test

import (
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

// TestLogPaceLogsOncePerInterval: the first occurrence is logged; later ones within the interval
// are counted, and the next line says how many there were.
func TestLogPaceLogsOncePerInterval(t *testing.T) {
	var p core.LogPace
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		at      time.Duration
		log     bool
		skipped int
	}{{0, true, 0}, {time.Second, false, 0}, {9 * time.Second, false, 0}, {10 * time.Second, true, 2}, {11 * time.Second, false, 0}, {30 * time.Second, true, 1}}
	for _, s := range steps {
		if log, skipped := p.Allow(t0.Add(s.at), 10*time.Second); log != s.log || skipped != s.skipped {
			t.Fatalf("at %v: Allow = %v, %d; want %v, %d", s.at, log, skipped, s.log, s.skipped)
		}
	}
}
