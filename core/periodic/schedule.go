package periodic

import (
	"errors"
	"fmt"
	"time"
)

// Schedule computes the ticks of a periodic job. Every process that runs the job computes the
// same ticks, so a tick names one occurrence across all of them.
type Schedule interface {
	// Next returns the first tick strictly after t, or the zero time when there is none.
	Next(t time.Time) time.Time
	// String describes the schedule ("cron 0 */5 * * * * Europe/Berlin", "every 1m0s").
	String() string
}

// interval is the schedule of Every.
type interval struct{ d time.Duration }

// Every returns a schedule that ticks every d, at the multiples of d counted from the Unix
// epoch (Every(time.Hour) ticks at every full hour of UTC), so processes started at different
// times agree on the ticks. d is at least a second and a whole number of seconds.
func Every(d time.Duration) (Schedule, error) {
	if d < time.Second || d%time.Second != 0 {
		return nil, fmt.Errorf("periodic.Every(%v): the interval must be a whole number of seconds, at least one", d)
	}
	return interval{d}, nil
}

func (s interval) Next(t time.Time) time.Time {
	u := t.Unix() // whole seconds, rounded down: t.Nanosecond() is never negative
	step := int64(s.d / time.Second)
	n := u - mod(u, step) + step
	return time.Unix(n, 0).In(t.Location())
}

func (s interval) String() string { return "every " + s.d.String() }

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// errNever is the error of a cron expression no date matches.
var errNever = errors.New("no date matches it")
