package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

func ack(context.Context, *core.Message[Refund]) error { return nil }

func TestSubscribeRefusesBadInput(t *testing.T) {
	h := coretest.New(t)
	q := h.Broker.Queue("refunds")
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil handler", core.Subscribe[Refund](h.App, q, nil), "nil handler"},
		{"cap 0", core.Subscribe(h.App, q, ack, core.DeadLetterAfter(0, "d")), "DeadLetterAfter(0"},
		{"empty dest", core.Subscribe(h.App, q, ack, core.DeadLetterAfter(3, " ")), "destination is empty"},
		{"workers 0", core.Subscribe(h.App, q, ack, core.Workers(0)), "Workers(0)"},
		{"nil codec", core.Subscribe(h.App, q, ack, core.WithCodec(nil)), "WithCodec(nil)"},
		{"bad policy", core.Subscribe(h.App, q, ack, core.OnError(core.Policy{})), "unknown policy"},
		{"bad backoff", core.Subscribe(h.App, q, ack, core.OnError(core.Backoff(time.Second, time.Millisecond))), "need 0 < base <= max"},
		{"timeout 0", core.Subscribe(h.App, q, ack, core.Timeout(0)), "Timeout(0s)"},
		{"nil endpoint", core.Subscribe(h.App, nil, ack), "nil endpoint"},
		{"nil option", core.Subscribe(h.App, q, ack, nil), "nil option"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, c.err, c.want)
		}
	}
	if err := core.Subscribe(h.App, q, ack); err != nil {
		t.Fatal(err)
	}
	err := core.Subscribe(h.App, q, ack)
	if err == nil || !strings.Contains(err.Error(), `"refunds" is already in use`) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := core.Subscribe(h.App, q, ack, core.Name("refunds-2")); err != nil {
		t.Fatalf("a second, named subscription on one queue: %v", err)
	}
}

func TestRetryAfterWaitsOnTheClock(t *testing.T) {
	h := coretest.New(t)
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		if m.Attempt() == 1 {
			return core.RetryAfter(30 * time.Second)
		}
		return nil
	})
	h.Start()
	id := h.Publish("refunds", Refund{ID: "r-1", Card: "busy"})
	h.WaitSettled(1)
	h.Advance(30*time.Second - time.Millisecond)
	if n := len(h.Verdicts(id)); n != 1 || h.Broker.Delayed() != 1 {
		t.Fatalf("before 30s: %d handler calls, %d delayed copies; want 1 and 1", n, h.Broker.Delayed())
	}
	h.Advance(time.Millisecond)
	h.WaitSettled(2)
	got := h.Verdicts(id)
	if got[0].Action != core.ActRetryAfter || got[0].Delay != 30*time.Second || got[1].Action != core.ActAck {
		t.Fatalf("verdicts %v", got)
	}
	if len(h.Logs.Find("delayed copy held in process (at-most-once: lost if the process stops first)")) != 1 {
		t.Fatal("the at-most-once delay was not logged")
	}
}

func TestPolicies(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		body    string
		handler core.Handler[Refund]
		opts    []core.Option
		want    []core.Action
		deadLen int
	}{
		{"plain error retries to the cap", `{}`, func(context.Context, *core.Message[Refund]) error { return boom },
			[]core.Option{core.DeadLetterAfter(2, "dead")}, []core.Action{core.ActRetry, core.ActDeadLetter}, 1},
		{"OnError drop", `{}`, func(context.Context, *core.Message[Refund]) error { return boom },
			[]core.Option{core.OnError(core.PolicyDrop)}, []core.Action{core.ActDrop}, 0},
		{"panic retries", `{}`, func(context.Context, *core.Message[Refund]) error { panic("kaboom") },
			[]core.Option{core.DeadLetterAfter(2, "dead")}, []core.Action{core.ActRetry, core.ActDeadLetter}, 1},
		{"OnPanic dead letter", `{}`, func(context.Context, *core.Message[Refund]) error { panic("kaboom") },
			[]core.Option{core.DeadLetterAfter(5, "dead"), core.OnPanic(core.PolicyDeadLetter)}, []core.Action{core.ActDeadLetter}, 1},
		{"undecodable goes straight to the dead letter", `{"id":`, ack,
			[]core.Option{core.DeadLetterAfter(5, "dead")}, []core.Action{core.ActDeadLetter}, 1},
		{"undecodable without dead letter drops", `not json`, ack, nil, []core.Action{core.ActDrop}, 0},
		{"OnDecodeError retry", `not json`, ack,
			[]core.Option{core.DeadLetterAfter(2, "dead"), core.OnDecodeError(core.PolicyRetry)}, []core.Action{core.ActRetry, core.ActDeadLetter}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := coretest.New(t)
			coretest.Subscribe(h, "q", c.handler, c.opts...)
			h.Start()
			id := h.PublishRaw("q", []byte(c.body), nil)
			h.WaitSettled(len(c.want))
			if got := h.Actions(id); !equal(got, c.want) {
				t.Fatalf("actions %v, want %v", got, c.want)
			}
			if dl := h.DeadLetters("dead"); len(dl) != c.deadLen {
				t.Fatalf("dead letters %v, want %d", dl, c.deadLen)
			} else if c.deadLen == 1 && dl[0].Attempt != len(c.want) {
				t.Fatalf("dead letter final attempt %d, want %d", dl[0].Attempt, len(c.want))
			}
		})
	}
}

func TestWarningsNameQueueMessageAndAttempt(t *testing.T) {
	h := coretest.New(t)
	coretest.Subscribe(h, "refunds", func(context.Context, *core.Message[Refund]) error { return core.Retry() },
		core.DeadLetterAfter(1, "refunds.dead"))
	coretest.Subscribe(h, "raw", ack)
	h.Start()
	id := h.Publish("refunds", Refund{ID: "r-1"})
	rawID := h.PublishRaw("raw", []byte("{broken"), nil)
	h.WaitSettled(2)
	for _, c := range []struct{ msg, id string }{
		{"settle: moving message to dead letter", id},
		{"settle: payload does not decode", rawID},
	} {
		recs := h.Logs.Find(c.msg)
		if len(recs) != 1 {
			t.Fatalf("%q logged %d times", c.msg, len(recs))
		}
		r := recs[0]
		if r.Level != slog.LevelWarn || r.Attrs["message_id"] != c.id || r.Attrs["attempt"] != int64(1) || r.Attrs["queue"] == nil {
			t.Errorf("%q: %+v", c.msg, r)
		}
	}
	decode := h.Logs.Find("settle: payload does not decode")[0]
	if size := decode.Attrs["size"]; size != int64(7) {
		t.Errorf("decode warning size = %v", size)
	}
	// The subscription has no dead letter, so its dead_letter decode policy drops: the log
	// names what was done.
	if p := decode.Attrs["policy"]; p != "drop" {
		t.Errorf("decode warning policy = %v, want drop", p)
	}
}

func TestWorkersBoundConcurrency(t *testing.T) {
	h := coretest.New(t)
	var active, peak atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[Refund]) error {
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		active.Add(-1)
		return nil
	}, core.Workers(3))
	h.Start()
	for range 10 {
		h.Publish("q", Refund{})
	}
	for range 3 {
		<-entered
	}
	if h.Broker.Unacked("q") > 4 {
		t.Fatalf("%d messages taken with 3 workers", h.Broker.Unacked("q"))
	}
	close(release)
	h.WaitSettled(10)
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
}

func TestOnSettledSeesOnlyItsSubscription(t *testing.T) {
	h := coretest.New(t)
	var mu sync.Mutex
	var seen []string
	coretest.Subscribe(h, "a", func(context.Context, *core.Message[Refund]) error { return core.Drop() },
		core.OnSettled(func(s core.Settlement) {
			mu.Lock()
			seen = append(seen, s.Subscription+":"+s.Verdict.String())
			mu.Unlock()
		}))
	coretest.Subscribe(h, "b", ack)
	h.Start()
	h.Publish("a", Refund{})
	h.Publish("b", Refund{})
	h.WaitSettled(2)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "a:drop" {
		t.Fatalf("seen %v", seen)
	}
	if err := core.Subscribe(h.App, h.Broker.Queue("c"), ack, core.OnSettled(nil)); err == nil {
		t.Fatal("OnSettled(nil) accepted")
	}
}

func TestMiddlewareOrder(t *testing.T) {
	h := coretest.New(t)
	var mu sync.Mutex
	var trace []string
	mw := func(name string) core.Middleware {
		return func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, d core.Delivery) error {
				mu.Lock()
				trace = append(trace, name)
				mu.Unlock()
				return next(ctx, d)
			}
		}
	}
	coretest.Subscribe(h, "q", func(context.Context, *core.Message[Refund]) error {
		mu.Lock()
		trace = append(trace, "handler")
		mu.Unlock()
		return nil
	}, core.Use(mw("outer"), mw("inner")))
	h.Start()
	h.Publish("q", Refund{})
	h.WaitSettled(1)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(trace, ",") != "outer,inner,handler" {
		t.Fatalf("trace %v", trace)
	}
}

func TestShutdownDrainsThenAbandons(t *testing.T) {
	h := coretest.New(t, core.WithShutdownTimeout(5*time.Second))
	started := make(chan struct{}, 2)
	coretest.Subscribe(h, "q", func(ctx context.Context, m *core.Message[Refund]) error {
		started <- struct{}{}
		<-ctx.Done() // a handler that only stops when told to
		return ctx.Err()
	})
	h.Start()
	id := h.Publish("q", Refund{})
	<-started
	stopped := make(chan struct{})
	go func() { h.Stop(); close(stopped) }()
	// Run now waits the shutdown timeout on the virtual clock before cancelling the handler.
	if err := h.Clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.Advance(5 * time.Second)
	<-stopped
	if got := h.Actions(id); !equal(got, []core.Action{core.ActAbandon}) {
		t.Fatalf("actions %v", got)
	}
	if m := h.Broker.Messages("q"); len(m) != 1 || m[0].ID != id || m[0].Attempt != 1 {
		t.Fatalf("abandoned message not back at the head with its attempt: %+v", m)
	}
}

type failingEndpoint struct{ name string }

func (f failingEndpoint) Queue() string { return f.name }
func (f failingEndpoint) Open(context.Context, core.Subscription) (core.Source, core.Finisher, error) {
	return nil, nil, errors.New(`table "refunds_queue" has no column "attempt"`)
}

type orderedBackend struct {
	name string
	log  *[]string
}

func (b orderedBackend) Start(context.Context) error {
	*b.log = append(*b.log, "start "+b.name)
	return nil
}
func (b orderedBackend) Close() error { *b.log = append(*b.log, "close "+b.name); return nil }

func TestStartFailureNamesSubscriptionAndClosesBackends(t *testing.T) {
	var log []string
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(orderedBackend{"a", &log})
	app.Register(orderedBackend{"b", &log})
	if err := core.Subscribe(app, failingEndpoint{"refunds"}, ack); err != nil {
		t.Fatal(err)
	}
	err := app.Run(context.Background())
	want := `settle: subscription "refunds" on refunds: table "refunds_queue" has no column "attempt"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if strings.Join(log, ",") != "start a,start b,close b,close a" {
		t.Fatalf("backend order %v", log)
	}
	if err := app.Run(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("second Run: %v", err)
	}
	select {
	case <-app.Ready():
		t.Fatal("Ready closed although start-up failed")
	default:
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BenchmarkDispatch measures core's path take → decode → handle → resolve → finish on the
// in-memory backend with a no-op handler and no observer; allocs/op is per message and includes
// the in-memory backend's own delivery value.
func BenchmarkDispatch(b *testing.B) {
	for _, c := range []struct {
		name    string
		workers int
		codec   core.Codec
		body    []byte
	}{
		{"raw/workers=1", 1, core.Raw, []byte("r-1")},
		{"raw/workers=4", 4, core.Raw, []byte("r-1")},
		{"json/workers=1", 1, core.JSON, []byte(`{"id":"r-1","card":"4242"}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			clk := clock.NewVirtual(coretest.Epoch)
			queues := coretest.NewBroker(clk, nil)
			app := core.New(core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
			app.Register(queues)
			var done atomic.Int64
			finished := make(chan struct{})
			target := int64(b.N)
			count := func() {
				if done.Add(1) == target {
					close(finished)
				}
			}
			var err error
			if c.codec == core.Raw {
				err = core.Subscribe(app, queues.Queue("q"), func(context.Context, *core.Message[[]byte]) error { count(); return nil },
					core.Workers(c.workers), core.WithCodec(core.Raw))
			} else {
				err = core.Subscribe(app, queues.Queue("q"), func(context.Context, *core.Message[Refund]) error { count(); return nil },
					core.Workers(c.workers))
			}
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				queues.Publish("q", c.body, nil)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { ran <- app.Run(ctx) }()
			<-finished
			b.StopTimer()
			stop()
			<-ran
		})
	}
}

// blockingEndpoint's Open waits until its context ends, as a slow server would.
type blockingEndpoint struct{ opening chan struct{} }

func (b blockingEndpoint) Queue() string { return "slow" }
func (b blockingEndpoint) Open(ctx context.Context, _ core.Subscription) (core.Source, core.Finisher, error) {
	close(b.opening)
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

func TestStopWhileStartingIsAStop(t *testing.T) {
	var log []string
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(orderedBackend{"a", &log})
	ep := blockingEndpoint{opening: make(chan struct{})}
	if err := core.Subscribe(app, ep, ack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	<-ep.opening
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run stopped while starting returned %v, want nil", err)
	}
	if strings.Join(log, ",") != "start a,close a" {
		t.Fatalf("backend order %v", log)
	}
}
