// Package clock is settle's time source: every time-dependent path in settle (polling, leases,
// delayed retries, reconnect backoff) takes its time from a Clock, so that tests can run it on a
// Virtual clock and move time forward with Advance instead of sleeping.
package clock

import (
	"context"
	"time"
)

// Clock is a source of time and timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single event, as time.Timer.
type Timer interface {
	// C is the channel the time is sent on; nil for a timer made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped a pending timer.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether the timer was pending.
	Reset(d time.Duration) bool
}

// Sleep waits for d on c, or until ctx is done, whichever comes first. It returns ctx.Err() when
// the context ended the wait.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Backoff is the next wait of a doubling backoff: first after none (prev <= 0), then twice
// prev, never more than limit.
func Backoff(prev, first, limit time.Duration) time.Duration {
	if prev <= 0 {
		return min(first, limit)
	}
	return min(prev*2, limit)
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
