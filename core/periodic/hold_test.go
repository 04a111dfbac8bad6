package periodic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// holding is a HoldingClaimer in memory: a claim is pending until finished, and given up by
// finish(false).
type holding struct {
	memClaims
	finished chan bool
}

func (h *holding) HoldTick(ctx context.Context, schedule string, tick time.Time) (bool, func(context.Context, bool) error, error) {
	won, err := h.ClaimTick(ctx, schedule, tick)
	if !won || err != nil {
		return won, nil, err
	}
	return true, func(_ context.Context, keep bool) error {
		if !keep {
			h.mu.Lock()
			delete(h.won, TickID(schedule, tick))
			h.mu.Unlock()
		}
		h.finished <- keep
		return nil
	}, nil
}

// down is a target whose every publish fails.
type down struct {
	c        clock.Clock
	attempts atomic.Int64
}

func (d *down) Queue() string                               { return "down" }
func (d *down) Sender(context.Context) (core.Sender, error) { return d, nil }
func (d *down) Clock() clock.Clock                          { return d.c }
func (d *down) Send(_ context.Context, msgs []core.Outgoing) []core.Receipt {
	d.attempts.Add(1)
	rs := make([]core.Receipt, len(msgs))
	for i := range rs {
		rs[i].Err = errors.New("the broker is down")
	}
	return rs
}

// TestAFailedPublishGivesTheClaimUp: a tick whose publish keeps failing is tried a bounded
// number of times on the scheduler's clock, then its claim is given up, so that another process
// may publish it; the status reports the error.
func TestAFailedPublishGivesTheClaimUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	start := utc("2026-12-04T18:00:00Z")
	v := clock.NewVirtual(start)
	claims := &holding{finished: make(chan bool, 1)}
	target := &down{c: v}
	every, _ := Every(time.Minute)
	p := startProcess(t, v, claims, target, every)
	for {
		if err := v.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case keep := <-claims.finished:
			if keep {
				t.Fatal("the claim of a tick never published was kept")
			}
			if n := target.attempts.Load(); n != publishAttempts {
				t.Errorf("%d publish attempts, want %d", n, publishAttempts)
			}
			claims.mu.Lock()
			still := claims.won[TickID("heartbeat", start.Add(time.Minute))]
			claims.mu.Unlock()
			if still {
				t.Error("the tick is still claimed")
			}
			if st := p.s.Schedules(); st[0].LastError == "" || st[0].Published != 0 {
				t.Errorf("status %+v, want the publish error and nothing published", st[0])
			}
			return
		default:
		}
		// The first advance reaches the tick, the next ones the waits between publishes.
		due, _ := v.NextDue()
		v.AdvanceTo(due)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the claim was never finished: %v", err)
		}
	}
}
