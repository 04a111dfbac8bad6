package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// RescueCooldown is how many of its waits a claimant that gave up waiting for its handlers
// claims ordinary rows before it tries to rescue again.
const RescueCooldown = 5

// RescueWaitFor is how long a claimant of lease length lease waits for its handlers before a
// rescue claim: at most a second, so that a handler that runs long (or a settlement that hangs
// on a dead connection) holds up the ordinary claims only briefly.
func RescueWaitFor(lease time.Duration) time.Duration { return min(lease, time.Second) }

// Unfinished counts a claimant's claimed deliveries that have not finished: a rescue of lapsed
// rows waits until none is left (every form rescues lapsed rows alone). One atomic add on the Finish path.
type Unfinished struct {
	n    atomic.Int64
	Idle chan struct{} // signalled, without blocking, when the count falls to zero
}

func (u *Unfinished) Add(n int) { u.n.Add(int64(n)) }

// Done counts n of them finished.
func (u *Unfinished) Done(n int) {
	if n > 0 && u.n.Add(-int64(n)) == 0 {
		select {
		case u.Idle <- struct{}{}:
		default:
		}
	}
}

func (u *Unfinished) Count() int { return int(u.n.Load()) }

// AwaitIdle waits until every claimed delivery has finished, or until by on c.
func (u *Unfinished) AwaitIdle(ctx context.Context, c clock.Clock, by time.Time) error {
	for u.Count() > 0 {
		wait := by.Sub(c.Now())
		if wait <= 0 {
			return nil
		}
		t := c.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-u.Idle:
		case <-t.C():
		}
		t.Stop()
	}
	return nil
}
