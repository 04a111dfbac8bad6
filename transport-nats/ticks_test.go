package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/periodic"
	"github.com/settlehq/settle/transport-nats"
)

func tickBucket(t *testing.T, url string) string {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	bucket := "settle_ticks_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, bucket)
	})
	return bucket
}

func claimsOn(t *testing.T, url, bucket string) *natsjs.TickClaims {
	t.Helper()
	c, err := natsjs.New(url, natsjs.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	claims, err := natsjs.NewTickClaims(c, bucket, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// TestTickClaimsOneWinnerPerTick: three connections race for the same 100 ticks, creating the
// bucket at once: each tick has exactly one winner.
func TestTickClaimsOneWinnerPerTick(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		bucket := tickBucket(t, url)
		start := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
		wins := make([]int, 100)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 3 {
			claims := claimsOn(t, url, bucket)
			wg.Go(func() {
				ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
				defer cancel()
				for i := range wins {
					won, err := claims.ClaimTick(ctx, "reconcile / every second", start.Add(time.Duration(i)*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					if won {
						mu.Lock()
						wins[i]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for i, n := range wins {
			if n != 1 {
				t.Errorf("tick %d won %d times, want once", i, n)
			}
		}
	})
}

type beat struct {
	Tick time.Time `json:"tick"`
}

// TestTickClaimsDriveASchedulerTrial: three schedulers claiming in one bucket publish each tick
// of 30 virtual seconds once while they stop and start.
func TestTickClaimsDriveASchedulerTrial(t *testing.T) {
	url := realServer(t)
	bucket := tickBucket(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*coretest.WaitTimeout)
	defer cancel()
	start := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	broker := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer broker.Close()
	every, _ := periodic.Every(time.Second)
	process := func() *periodic.Scheduler {
		s, err := periodic.New(claimsOn(t, url, bucket), periodic.WithClock(v))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := core.NewPublisher[beat](broker.Queue("beats"))
		if err := periodic.Add(s, "beat", every, pub, func(_ context.Context, tk periodic.Tick) (beat, error) {
			return beat{Tick: tk.At}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	procs := []*periodic.Scheduler{process(), process(), process()}
	plan := map[int]int{5: 0, 9: 1, 14: 2, 20: 0}
	for sec := 1; sec <= 30; sec++ {
		if i, ok := plan[sec]; ok {
			procs[i].Close()
			procs[i] = process()
		}
		if err := v.BlockUntil(ctx, 3); err != nil {
			t.Fatalf("second %d: %v", sec, err)
		}
		v.Advance(time.Second)
	}
	if err := v.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	got := broker.Messages("beats")
	if len(got) != 30 {
		t.Fatalf("%d messages for 30 ticks, want 30", len(got))
	}
	for i, m := range got {
		if want := periodic.TickID("beat", start.Add(time.Duration(i+1)*time.Second)); m.ID != want {
			t.Fatalf("message %d is %s, want %s", i+1, m.ID, want)
		}
	}
}
