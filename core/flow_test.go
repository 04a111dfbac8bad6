package core_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

func TestConcurrencyAcrossApps(t *testing.T) {
	coretest.ConcurrencyProof(t, core.NewMemoryLimitStore(), "concurrency", 200)
}

func TestRateOnVirtualClock(t *testing.T) {
	coretest.RateProof(t, core.NewMemoryLimitStore(), "rate")
}

func TestThrottledTeachesTheRateLimit(t *testing.T) {
	h := coretest.New(t)
	store := core.NewMemoryLimitStore()
	calls := 0
	coretest.Subscribe(h, "pay", func(ctx context.Context, m *core.Message[string]) error {
		calls++
		return core.Throttled(10*time.Second, errors.New("429 from the provider"))
	}, core.Rate(10, time.Second, 5, core.SharedIn(store), core.LimitScope("throttle")))
	h.Start()
	id := h.Publish("pay", "x")
	h.WaitSettled(1)
	v := h.Verdicts(id)[0]
	if v.Action != core.ActRetryAfter || v.Delay != 10*time.Second {
		t.Fatalf("verdict %v, want retry after 10s", v)
	}
	wait, err := store.TakeToken(context.Background(), "throttle/", h.Clock.Now(), 100*time.Millisecond, 5)
	if err != nil || wait != 10*time.Second {
		t.Fatalf("after Throttled(10s) the next token is %v away (err %v), want 10s", wait, err)
	}
}

func TestShutdownWhileWaitingGivesTheDeliveryBack(t *testing.T) {
	h := coretest.New(t)
	store := core.NewMemoryLimitStore()
	// Another process holds the only slot.
	if ok, _ := store.AcquireSlot(context.Background(), "busy/", 1, "other", h.Clock.Now(), time.Hour); !ok {
		t.Fatal("could not take the slot")
	}
	called := false
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[string]) error {
		called = true
		return nil
	}, core.Concurrency(1, core.SharedIn(store), core.LimitScope("busy")))
	h.Start()
	base := h.Clock.Pending()
	id := h.Publish("q", "x")
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := h.Clock.BlockUntil(ctx, base+1); err != nil { // the delivery polls for a slot
		t.Fatal(err)
	}
	h.Stop()
	if called {
		t.Fatal("the handler ran without a slot")
	}
	if got := h.Actions(id); len(got) != 1 || got[0] != core.ActAbandon {
		t.Fatalf("actions %v, want one abandon", got)
	}
	if left := h.Broker.Messages("q"); len(left) != 1 || left[0].ID != id {
		t.Fatalf("queue holds %v after shutdown, want the waiting message back", left)
	}
}

func TestLimitOptionsRefuseImpossibleValues(t *testing.T) {
	h := coretest.New(t)
	for _, opt := range []core.Option{
		core.Concurrency(0), core.Rate(0, time.Second, 1), core.Rate(5, 0, 1), core.Rate(5, time.Second, 0),
		core.Concurrency(1, core.SharedIn(nil)), core.Concurrency(1, core.PerKey(nil)), core.Concurrency(1, core.SlotLease(time.Millisecond)),
	} {
		err := core.Subscribe(h.App, h.Broker.Queue("q"), func(ctx context.Context, m *core.Message[string]) error { return nil }, opt)
		if err == nil {
			t.Errorf("an impossible limit was accepted")
		}
	}
	err := core.SubscribeBatch(h.App, h.Broker.Queue("b"), func(ctx context.Context, ms []*core.Message[string]) error { return nil },
		core.BatchSize(5), core.Concurrency(1))
	if err != nil {
		t.Fatalf("SubscribeBatch: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := h.App.Run(ctx); err == nil || !strings.Contains(err.Error(), "batch subscription") {
		t.Fatalf("a batch subscription with Concurrency started: %v", err)
	}
}

func TestPauseMidDrain(t *testing.T) {
	coretest.PauseProof(t, core.NewMemoryPauseStore())
}

func TestPauseNeedsAPausableSubscription(t *testing.T) {
	h := coretest.New(t)
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[string]) error { return nil })
	h.Start()
	if err := h.App.Pause(context.Background(), "q"); !errors.Is(err, core.ErrNotPausable) {
		t.Fatalf("Pause of a queue with no Pausable subscription: %v, want ErrNotPausable", err)
	}
}

func TestRatePerKey(t *testing.T) {
	coretest.PerKeyRateProof(t, core.NewMemoryLimitStore(), "per-key")
}

// A queue paused before the App starts (a restart) takes nothing until it is resumed, and a
// pause stored by another process is seen within the poll.
func TestPauseSurvivesARestartAndComesFromTheStore(t *testing.T) {
	h := coretest.New(t)
	store := core.NewMemoryPauseStore()
	if err := store.SetPaused(context.Background(), "q", true); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[string]) error {
		handled.Add(1)
		return nil
	}, core.Pausable(store, core.PausePoll(time.Second)))
	h.Start()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := h.Clock.BlockUntil(ctx, 1); err != nil { // the subscription's poll of the flag is armed
		t.Fatal(err)
	}
	h.Publish("q", "x")
	h.Advance(500 * time.Millisecond) // within the poll: still paused
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d handled while paused since before the start", n)
	}
	if got := h.App.Health(context.Background()).Subscriptions[0].State; got != "paused" {
		t.Fatalf("health state %q, want paused", got)
	}
	// Another process resumes the queue through the store: seen at the next poll.
	if err := store.SetPaused(context.Background(), "q", false); err != nil {
		t.Fatal(err)
	}
	h.Advance(time.Second)
	h.WaitSettled(1)
	if n := handled.Load(); n != 1 {
		t.Fatalf("%d handled after the resume, want 1", n)
	}
}

// failingRenewals is a store whose slot renewals fail.
type failingRenewals struct{ *core.MemoryLimitStore }

func (failingRenewals) RenewSlot(context.Context, string, string, time.Time, time.Duration) error {
	return errors.New("store unreachable")
}

// A slot whose renewal fails is reported: it will lapse at its lease's end.
func TestSlotRenewalFailureIsLogged(t *testing.T) {
	h := coretest.New(t)
	release := make(chan struct{})
	started := make(chan struct{})
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[string]) error {
		close(started)
		<-release
		return nil
	}, core.Concurrency(1, core.SharedIn(failingRenewals{core.NewMemoryLimitStore()}), core.SlotLease(4*time.Second)))
	h.Start()
	h.Publish("q", "x")
	<-started
	defer close(release)
	armed := h.Clock.Pending() // the slot's renewal among them
	h.Advance(2 * time.Second) // half the lease: the renewal runs, fails, and is armed again
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := h.Clock.BlockUntil(ctx, armed); err != nil {
		t.Fatal(err)
	}
	if len(h.Logs.Find("settle: renewing a concurrency slot failed; it lapses at its lease's end unless a later renewal succeeds")) == 0 {
		t.Fatal("a failed slot renewal was not logged")
	}
}
