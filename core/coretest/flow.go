package coretest

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Flow-control proofs: each runs on the in-memory broker against a core.LimitStore, so that a
// store's own tests (core/limit/sqllimit) prove the same ledgers as the in-process store.

type flowMsg struct {
	N int `json:"n"`
}

// ConcurrencyProof drains n messages with 4 subscribers (Workers(4) each) in 2 Apps on the
// real clock, every one mounted with Concurrency(5) in store under one scope, and checks the
// ledger of handler starts and ends: never more than 5 handlers overlap, 5 do overlap at some
// point, and every message is handled and acknowledged exactly once. scope must be unique to
// the test (stores may be shared by tests).
func ConcurrencyProof(t testing.TB, store core.LimitStore, scope string, n int) {
	t.Helper()
	const limit = 5
	broker := NewBroker(clock.Real(), nil)
	queue := "flow-" + scope
	var cur, peak, over atomic.Int64
	seen := make([]atomic.Int32, n)
	var ledgerMu sync.Mutex
	var ledger []ledgerEntry // every start and end, with the handlers running after it
	mark := func(delta int64) int64 {
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		c := cur.Add(delta)
		ledger = append(ledger, ledgerEntry{time.Now(), c})
		return c
	}
	var acked atomic.Int64
	done := make(chan struct{})
	handle := func(ctx context.Context, m *core.Message[flowMsg]) error {
		c := mark(1)
		defer mark(-1)
		if c > limit {
			over.Add(1)
		}
		for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
		}
		seen[m.Payload.N].Add(1)
		// The downstream call the limit protects: long enough beside the store's round trips
		// that the limit is reached.
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	observe := func(s core.Settlement) {
		if s.Err == nil && s.Verdict.Action == core.ActAck && acked.Add(1) == int64(n) {
			close(done)
		}
	}
	stop := runApps(t, broker, queue, handle, observe,
		core.Workers(4), core.Concurrency(limit, core.SharedIn(store), core.LimitScope(scope), core.SlotPoll(time.Millisecond)))
	defer stop()
	for i := range n {
		body, _ := json.Marshal(flowMsg{N: i})
		broker.Publish(queue, body, nil)
	}
	select {
	case <-done:
	case <-time.After(6 * WaitTimeout):
		t.Fatalf("only %d of %d messages acknowledged within %v", acked.Load(), n, 6*WaitTimeout)
	}
	if o := over.Load(); o > 0 {
		t.Errorf("%d handler starts found more than %d handlers running (peak %d)", o, limit, peak.Load())
	}
	if p := peak.Load(); p != limit {
		t.Errorf("peak overlap %d, want exactly the limit %d (the limit should be used)", p, limit)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Errorf("message %d handled %d times, want 1", i, c)
		}
	}
	ledgerMu.Lock()
	full := atLimit(ledger, limit)
	ledgerMu.Unlock()
	// How much of the time the limit is used depends on the store's round trips beside the
	// handlers' 20 ms, that is on the machine's speed: reported, not asserted.
	t.Logf("concurrency proof: peak %d; %d handlers ran at once %.0f%% of the time from the first start to the last end", peak.Load(), limit, 100*full)
}

// runApps runs 2 Apps with 2 subscriptions each of handle on queue, mounted with opts, until
// the returned function is called (it waits for the Apps and closes broker).
func runApps(t testing.TB, broker *Broker, queue string, handle core.Handler[flowMsg], observe core.Observer, opts ...core.Option) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	for a := range 2 {
		app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals(), core.WithObserver(observe))
		for i := range 2 {
			all := append([]core.Option{core.Name("sub-" + strconv.Itoa(a) + "-" + strconv.Itoa(i))}, opts...)
			if err := core.Subscribe(app, broker.Queue(queue), handle, all...); err != nil {
				cancel()
				t.Fatalf("Subscribe: %v", err)
			}
		}
		runs.Go(func() {
			if err := app.Run(ctx); err != nil {
				t.Errorf("App.Run: %v", err)
			}
		})
	}
	return func() { cancel(); runs.Wait(); _ = broker.Close() }
}

// ledgerEntry is a handler start or end: when, and how many handlers ran after it.
type ledgerEntry struct {
	at      time.Time
	running int64
}

// atLimit returns the share of the ledger's span during which limit handlers ran.
func atLimit(ledger []ledgerEntry, limit int64) float64 {
	if len(ledger) < 2 {
		return 0
	}
	var full time.Duration
	for i := 1; i < len(ledger); i++ {
		if ledger[i-1].running >= limit {
			full += ledger[i].at.Sub(ledger[i-1].at)
		}
	}
	return float64(full) / float64(ledger[len(ledger)-1].at.Sub(ledger[0].at))
}

// RateProof runs one subscription mounted with Rate(50, time.Second, 10) in store on the
// virtual clock for 30 virtual seconds with more messages than the rate allows, and checks the
// ledger of handler starts: no 1-second window holds more than 60 (the burst plus the rate),
// and the total is within 5% of 10 + 50·30.
func RateProof(t testing.TB, store core.LimitStore, scope string) {
	t.Helper()
	h := New(t)
	var mu sync.Mutex
	var starts []time.Time
	Subscribe(h, "rated", func(ctx context.Context, m *core.Message[flowMsg]) error {
		mu.Lock()
		starts = append(starts, h.Clock.Now())
		mu.Unlock()
		return nil
	}, core.Rate(50, time.Second, 10, core.SharedIn(store), core.LimitScope(scope)))
	h.Start()
	base := h.Clock.Pending()
	for i := range 2000 {
		h.Publish("rated", flowMsg{N: i})
	}
	end := Epoch.Add(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 6*WaitTimeout)
	defer cancel()
	for {
		// The one worker waits for its next token on the clock: move to when it is due.
		if err := h.Clock.BlockUntil(ctx, base+1); err != nil {
			t.Fatalf("the worker never waited for a token: %v", err)
		}
		due, _ := h.Clock.NextDue()
		if due.After(end) {
			break
		}
		h.Clock.AdvanceTo(due)
	}
	mu.Lock()
	defer mu.Unlock()
	const want = 10 + 50*30
	t.Logf("rate proof: %d handler starts in 30 virtual seconds (limit %d)", len(starts), want)
	if n := len(starts); n < want*95/100 || n > want*105/100 {
		t.Errorf("%d handler starts in 30 s, want within 5%% of %d", n, want)
	}
	for i, s := range starts {
		j := i
		for j < len(starts) && starts[j].Before(s.Add(time.Second)) {
			j++
		}
		if j-i > 60 {
			t.Fatalf("%d starts in the second from %v, want at most 60", j-i, s.Sub(Epoch))
		}
	}
}

// PauseProof drains 1000 messages with Workers(4) on a Pausable subscription whose flag lives
// in store, pauses the queue mid-drain with App.Pause, and checks: no handler starts once
// Pause has returned (nor after the clock moves past the pause poll), health says paused,
// Resume completes the drain, and every message is handled and acknowledged exactly once.
func PauseProof(t testing.TB, store core.PauseStore) {
	t.Helper()
	const n = 1000
	h := New(t)
	var paused atomic.Bool
	var late atomic.Int64
	seen := make([]atomic.Int32, n)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	Subscribe(h, "drain", func(ctx context.Context, m *core.Message[flowMsg]) error {
		if paused.Load() {
			late.Add(1)
		}
		seen[m.Payload.N].Add(1)
		if m.Payload.N >= n/5 { // mid-drain: hold the handlers running when the pause comes
			once.Do(func() { close(reached) })
			<-release
		}
		return nil
	}, core.Workers(4), core.Pausable(store))
	h.Start()
	for i := range n {
		h.Publish("drain", flowMsg{N: i})
	}
	<-reached
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	pausing := make(chan error, 1)
	go func() { pausing <- h.App.Pause(ctx, "drain") }()
	for { // Pause stores the flag, then waits for the held handlers
		if p, err := store.Paused(ctx, "drain"); err != nil {
			t.Fatalf("Paused: %v", err)
		} else if p {
			break
		}
		runtime.Gosched()
	}
	close(release)
	if err := <-pausing; err != nil {
		t.Fatalf("Pause: %v", err)
	}
	paused.Store(true)
	at := len(h.Settlements())
	if p, err := store.Paused(ctx, "drain"); err != nil || !p {
		t.Fatalf("the store says paused=%v (err %v) after Pause", p, err)
	}
	h.Advance(5 * core.DefaultPausePoll) // the subscription reads the flag again: still paused
	if got := h.App.Health(ctx).Subscriptions[0].State; got != "paused" {
		t.Errorf("health state %q while paused, want paused", got)
	}
	if at == n {
		t.Fatalf("the drain finished before the pause; nothing was proved")
	}
	if l := late.Load(); l > 0 {
		t.Fatalf("%d handlers started after Pause returned", l)
	}
	paused.Store(false)
	if err := h.App.Resume(ctx, "drain"); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	all := h.WaitSettled(n)
	if len(all) != n {
		t.Errorf("%d settlements, want %d", len(all), n)
	}
	for _, s := range all {
		if s.Verdict.Action != core.ActAck {
			t.Errorf("message %s settled %v, want ack", s.Delivery.ID(), s.Verdict)
		}
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Errorf("message %d handled %d times, want 1", i, c)
		}
	}
	t.Logf("pause proof: paused after %d of %d settlements, resumed and drained with 0 lost, 0 double", at, n)
}

// PerKeyRateProof runs a rate limit of 2 per second (burst 1) per key, kept in store, for 20
// keys at once over 20 virtual seconds, one caller per key asking for tokens as fast as they
// come, and checks every key's ledger: no 1-second window holds more than 2 starts of a key, and
// each key got its 2·20 (+1) tokens, so no key starves another.
func PerKeyRateProof(t testing.TB, store core.LimitStore, scope string) {
	t.Helper()
	const keys, seconds = 20, 20
	clk := clock.NewVirtual(Epoch)
	l := core.NewRateLimiter(store, scope, time.Second/2, 1, clk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var mu sync.Mutex
	starts := make(map[string][]time.Time, keys)
	base := clk.Pending()
	for k := range keys {
		key := "customer-" + strconv.Itoa(k)
		wg.Go(func() {
			for {
				if _, err := l.Acquire(ctx, key); err != nil {
					return
				}
				mu.Lock()
				starts[key] = append(starts[key], clk.Now())
				mu.Unlock()
			}
		})
	}
	end := Epoch.Add(seconds * time.Second)
	wait, stop := context.WithTimeout(context.Background(), 6*WaitTimeout)
	defer stop()
	for {
		// Every key's caller waits for its next token on the clock.
		if err := clk.BlockUntil(wait, base+keys); err != nil {
			t.Fatalf("the callers never all waited: %v", err)
		}
		due, _ := clk.NextDue()
		if due.After(end) {
			break
		}
		clk.AdvanceTo(due)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		key := "customer-" + strconv.Itoa(k)
		ts := starts[key]
		if want := 2*seconds + 1; len(ts) != want {
			t.Errorf("key %s: %d tokens in %d s, want %d", key, len(ts), seconds, want)
		}
		for i := range ts {
			if i+2 < len(ts) && ts[i+2].Before(ts[i].Add(time.Second)) {
				t.Fatalf("key %s: 3 starts within a second from %v", key, ts[i].Sub(Epoch))
			}
		}
	}
}
