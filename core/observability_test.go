package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// events collects an App's events.
type events struct {
	mu  sync.Mutex
	all []core.Event
	got chan core.Event
}

func newEvents() *events { return &events{got: make(chan core.Event, 16)} }

func (e *events) observe(ev core.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	e.got <- ev
}

func TestTimeoutCancelsTheHandlerAndReportsOneThatIgnoresIt(t *testing.T) {
	ev := newEvents()
	h := coretest.New(t, core.WithEventObserver(ev.observe))
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	coretest.Subscribe(h, "polite", func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, core.Timeout(10*time.Second), core.DeadLetterAfter(1, "dead"))
	coretest.Subscribe(h, "stubborn", func(ctx context.Context, m *core.Message[Refund]) error {
		entered <- struct{}{}
		<-release // ignores its context
		return nil
	}, core.Timeout(10*time.Second))
	h.Start()
	polite := h.Publish("polite", Refund{ID: "r-1"})
	stubborn := h.Publish("stubborn", Refund{ID: "r-2"})
	<-entered
	<-entered
	if err := h.Clock.BlockUntil(context.Background(), 4); err != nil { // two deadlines, two grace timers
		t.Fatal(err)
	}
	h.Advance(10*time.Second - time.Millisecond)
	if n := len(h.Settlements()); n != 0 {
		t.Fatalf("%d settlements before the timeout", n)
	}
	h.Advance(time.Millisecond)
	h.WaitSettled(1)
	// The polite handler returned DeadlineExceeded: the error policy (retry) at the cap of 1.
	if got := h.Actions(polite); len(got) != 1 || got[0] != core.ActDeadLetter {
		t.Fatalf("polite handler's message: %v", got)
	}
	if dl := h.DeadLetters("dead"); len(dl) != 1 || dl[0].Headers[core.HeaderError] == "" {
		t.Fatalf("dead letters %+v", dl)
	}
	h.Advance(core.TimeoutGrace(10 * time.Second))
	e := <-ev.got
	if e.Kind != core.EventHandlerOverran || e.MessageID != stubborn || e.Subscription != "stubborn" || e.Attempt != 1 {
		t.Fatalf("event %+v", e)
	}
	if recs := h.Logs.Find("settle: handler still running after its timeout and grace; it ignores its context"); len(recs) != 1 ||
		recs[0].Attrs["message_id"] != stubborn || recs[0].Attrs["queue"] != "stubborn" {
		t.Fatalf("warning %+v", recs)
	}
	close(release)
	h.WaitSettled(2)
	if got := h.Actions(stubborn); len(got) != 1 || got[0] != core.ActAck {
		t.Fatalf("a handler that returns nil late is acked: %v", got)
	}
}

// delayingQueue is the in-memory queue with a finisher that claims to hold delays durably, as
// a SQL table with retry_after does.
type delayingQueue struct{ core.Endpoint }

type delayingFinisher struct{ core.Finisher }

func (delayingFinisher) HoldsDelays() bool { return true }

func (q delayingQueue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := q.Endpoint.Open(ctx, sub)
	return src, delayingFinisher{fin}, err
}

func TestBackoffPolicy(t *testing.T) {
	boom := errors.New("rate limited")
	failing := func(context.Context, *core.Message[Refund]) error { return boom }
	t.Run("durable delays", func(t *testing.T) {
		h := coretest.New(t)
		err := core.Subscribe(h.App, delayingQueue{h.Broker.Queue("q")}, failing,
			core.OnError(core.Backoff(time.Second, 4*time.Second)), core.DeadLetterAfter(6, "dead"))
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		id := h.Publish("q", Refund{ID: "r"})
		bounds := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		for i, bound := range bounds {
			h.WaitSettled(i + 1)
			v := h.Verdicts(id)[i]
			if v.Action != core.ActRetryAfter || v.Delay < 0 || v.Delay > bound || !errors.Is(v.Cause, boom) {
				t.Fatalf("attempt %d: %v (cause %v), want retry_after within %v", i+1, v, v.Cause, bound)
			}
			h.Advance(bound)
		}
		h.WaitSettled(6)
		if v := h.Verdicts(id)[5]; v.Action != core.ActDeadLetter {
			t.Fatalf("at the cap: %v", v)
		}
	})
	t.Run("no durable delays", func(t *testing.T) {
		h := coretest.New(t)
		coretest.Subscribe(h, "q", failing, core.OnError(core.Backoff(time.Second, time.Minute)), core.DeadLetterAfter(2, "dead"))
		h.Start()
		id := h.Publish("q", Refund{ID: "r"})
		h.WaitSettled(2)
		if got := h.Actions(id); len(got) != 2 || got[0] != core.ActRetry || got[1] != core.ActDeadLetter {
			t.Fatalf("actions %v, want an immediate retry, then the cap", got)
		}
		if recs := h.Logs.Find("settle: a Backoff policy on a queue that keeps no delays durably; its failures retry at once (a delay kept in the process would be lost with it)"); len(recs) != 1 {
			t.Fatalf("warning logged %d times", len(recs))
		}
	})
}

// checkedBackend is a backend whose health a test sets.
type checkedBackend struct {
	mu sync.Mutex
	c  core.ComponentHealth
}

func (b *checkedBackend) Close() error { return nil }
func (b *checkedBackend) CheckHealth(ctx context.Context) core.ComponentHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}
func (b *checkedBackend) set(c core.ComponentHealth) {
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
}

func TestHealthProbes(t *testing.T) {
	db := &checkedBackend{c: core.ComponentHealth{Name: "db", Status: core.HealthPass, State: "connected"}}
	h := coretest.New(t)
	h.App.Register(db)
	srv := httptest.NewServer(core.HealthHandler(h.App))
	defer srv.Close()
	probe := func(path string) (int, core.Health) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got core.Health
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/health+json" {
			t.Fatalf("content type %q", ct)
		}
		return resp.StatusCode, got
	}
	coretest.Subscribe(h, "refunds", ack)
	if code, got := probe("/readyz"); code != http.StatusServiceUnavailable || got.State != "new" {
		t.Fatalf("before Run: %d %+v", code, got)
	}
	h.Start()
	h.Publish("refunds", Refund{ID: "r"})
	h.WaitSettled(1)
	code, got := probe("/readyz")
	if code != http.StatusOK || got.Status != core.HealthPass || len(got.Backends) != 2 || len(got.Subscriptions) != 1 ||
		got.Subscriptions[0].State != "running" || got.Subscriptions[0].SettledAt.IsZero() {
		t.Fatalf("running: %d %+v", code, got)
	}
	db.set(core.ComponentHealth{Name: "db", Status: core.HealthFail, State: "unreachable", Output: "dial tcp: connection refused"})
	if code, got := probe("/readyz"); code != http.StatusServiceUnavailable || got.Status != core.HealthFail {
		t.Fatalf("backend down: %d %+v", code, got)
	}
	if code, _ := probe("/livez"); code != http.StatusOK {
		t.Fatalf("livez with a backend down: %d (the process still works)", code)
	}
	db.set(core.ComponentHealth{Name: "db", Status: core.HealthPass, State: "connected"})
	if code, _ := probe("/readyz"); code != http.StatusOK {
		t.Fatalf("backend back: %d", code)
	}
	h.Stop()
	if code, got := probe("/livez"); code != http.StatusServiceUnavailable || got.State != "stopped" {
		t.Fatalf("after Run: %d %+v", code, got)
	}
}
