package transporttest

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// app is one running App of a test, with its settlements recorded.
type app struct {
	t    *testing.T
	env  Env
	rec  *coretest.Recorder
	stop func()
}

func logger(t *testing.T) *slog.Logger {
	if os.Getenv("SETTLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// start runs one App with handler on the logical queue "work".
func start[T any](t *testing.T, env Env, h core.Handler[T], shutdown time.Duration, opts ...core.Option) *app {
	t.Helper()
	return startApp(t, env, shutdown, func(a *core.App) {
		if err := core.Subscribe(a, env.Backend.Endpoint("work"), h, opts...); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	})
}

// startApp runs one App whose subscriptions mount makes, once the backend is registered.
func startApp(t *testing.T, env Env, shutdown time.Duration, mount func(a *core.App)) *app {
	t.Helper()
	rec := coretest.NewRecorder(t)
	leaks := env.LeakCheck.Check(t)
	a := core.New(core.WithClock(env.Clock), core.WithLogger(logger(t)), core.WithoutSignals(),
		core.WithObserver(rec.Observe), core.WithShutdownTimeout(shutdown))
	env.Backend.Register(a)
	mount(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("App.Run: %v", err)
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("App not ready within %v", coretest.WaitTimeout)
	}
	r := &app{t: t, env: env, rec: rec}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("App.Run: %v", err)
			}
			leaks()
		case <-time.After(coretest.WaitTimeout + shutdown):
			t.Errorf("App.Run did not return after stop")
		}
	}
	t.Cleanup(r.stop)
	return r
}

func publish(t *testing.T, env Env, queue, body string, headers map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := env.Backend.Publish(ctx, queue, []byte(body), headers); err != nil {
		t.Fatalf("Publish to %q: %v", queue, err)
	}
}

func drain(t *testing.T, env Env, queue string) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	m, err := env.Backend.Drain(ctx, queue, 0)
	if err != nil {
		t.Fatalf("Drain %q: %v", queue, err)
	}
	return m
}

// drainAtLeast waits until queue has yielded at least n messages (a server-side move, such as
// a quorum queue's dead letter, may land a moment after the settlement that caused it).
func drainAtLeast(t *testing.T, env Env, queue string, n int) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	m, err := env.Backend.Drain(ctx, queue, n)
	if err != nil {
		t.Fatalf("Drain %q (want %d): %v", queue, n, err)
	}
	return m
}

func actions(s []core.Settlement) []core.Action {
	out := make([]core.Action, len(s))
	for i, x := range s {
		out[i] = x.Verdict.Action
	}
	return out
}

func attempts(s []core.Settlement) []int {
	out := make([]int, len(s))
	for i, x := range s {
		out[i] = x.Delivery.Attempt()
	}
	return out
}

func expectActions(t *testing.T, s []core.Settlement, want ...core.Action) {
	t.Helper()
	if got := actions(s); !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
}

// advance moves a virtual clock by d; on real time it does nothing (the delay passes by itself).
// Callers advance only once what should wait is armed (a settlement reported after its delay
// was scheduled, or blockUntil).
func advance(env Env, d time.Duration) {
	if env.Virtual != nil {
		env.Virtual.Advance(d)
	}
}

// blockUntil waits until n timers are armed on a virtual clock.
func blockUntil(t *testing.T, env Env, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := env.Virtual.BlockUntil(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers on the clock (%d armed): %v", n, env.Virtual.Pending(), err)
	}
}

func delay(env Env) time.Duration {
	if env.Virtual != nil {
		return 30 * time.Second
	}
	return Delay
}

// stopAbandoning stops a whose handlers wait for their context: the shutdown timeout passes
// (advanced on a virtual clock) and their deliveries are abandoned.
func stopAbandoning(t *testing.T, env Env, a *app, shutdown time.Duration) {
	t.Helper()
	armed := 0
	if env.Virtual != nil {
		armed = env.Virtual.Pending()
	}
	stopped := make(chan struct{})
	go func() { a.stop(); close(stopped) }()
	if env.Virtual != nil {
		blockUntil(t, env, armed+1) // the App's shutdown timeout
		advance(env, shutdown)
	}
	<-stopped
}

// deadLetter returns the destination to give core.DeadLetterAfter for the logical queue name.
func deadLetter(env Env, queue string) string {
	if n, ok := env.Backend.(DeadLetterNamer); ok {
		return n.DeadLetterName(queue)
	}
	return queue
}

// expectReason checks that a dead letter says why it died: its count, its origin, when, and
// the last failure (which contains reason).
func expectReason(t *testing.T, env Env, m Message, count int, reason string) {
	t.Helper()
	if env.Features.NoHeaders {
		return
	}
	info, ok, err := core.ParseDeadLetterInfo(m.Headers)
	switch {
	case !ok:
		t.Fatalf("dead letter carries no dead-letter headers: %v", m.Headers)
	case err != nil:
		t.Fatalf("dead-letter headers %v: %v", m.Headers, err)
	case info.Count != count:
		t.Fatalf("dead letter's %s is %d, want %d", core.HeaderRetryCount, info.Count, count)
	case info.Origin == "":
		t.Fatalf("dead letter has no %s: %v", core.HeaderOrigin, m.Headers)
	case info.At.IsZero():
		t.Fatalf("dead letter has no %s: %v", core.HeaderDeadAt, m.Headers)
	case !strings.Contains(info.Error, reason):
		t.Fatalf("dead letter's %s is %q, want it to say %q", core.HeaderError, info.Error, reason)
	}
}

// shutdownTimeout is the shutdown timeout of an App whose handlers are abandoned: on real time
// long enough for a real server's connection to close within it (the App bounds closing by the
// same timeout), on a virtual clock whatever the test advances.
func shutdownTimeout(env Env) time.Duration {
	if env.Virtual != nil {
		return 200 * time.Millisecond
	}
	return 2 * time.Second
}
