package transporttest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

type testCase struct {
	name string
	run  func(t *testing.T, env Env)
}

var raw = core.WithCodec(core.Raw)

var cases = []testCase{
	{"Ack", func(t *testing.T, env Env) {
		a := start(t, env, func(context.Context, *core.Message[string]) error { return nil }, time.Second, raw)
		publish(t, env, "work", "m1", nil)
		expectActions(t, a.rec.WaitSettled(1), core.ActAck)
		a.stop()
		if m := drain(t, env, "work"); len(m) != 0 {
			t.Fatalf("queue holds %d messages after ack", len(m))
		}
	}},
	{"Drop", func(t *testing.T, env Env) {
		a := start(t, env, func(context.Context, *core.Message[string]) error { return core.Drop() }, time.Second,
			raw, core.DeadLetterAfter(3, deadLetter(env, "work.dead")))
		publish(t, env, "work", "m1", nil)
		expectActions(t, a.rec.WaitSettled(1), core.ActDrop)
		a.stop()
		if m := drain(t, env, "work"); len(m) != 0 {
			t.Fatalf("queue holds %d messages after drop", len(m))
		}
		if m := drain(t, env, "work.dead"); len(m) != 0 {
			t.Fatalf("a dropped message went to settle's dead letter: %d", len(m))
		}
	}},
	{"RetryThenAck", func(t *testing.T, env Env) {
		var bodies sync.Map
		a := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			bodies.Store(m.Attempt(), m.Payload)
			if m.Attempt() == 1 {
				return core.Retry()
			}
			return nil
		}, time.Second, raw)
		publish(t, env, "work", "m1", nil)
		s := a.rec.WaitSettled(2)
		expectActions(t, s, core.ActRetry, core.ActAck)
		if got := attempts(s); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("attempts %v, want [1 2]", got)
		}
		if b, _ := bodies.Load(2); b != "m1" {
			t.Fatalf("second delivery's body %q", b)
		}
	}},
	{"RetryAfterNoEarlier", func(t *testing.T, env Env) {
		d := delay(env)
		var first time.Time
		var second atomic.Value
		a := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			if m.Attempt() == 1 {
				first = env.Clock.Now()
				return core.RetryAfter(d)
			}
			second.Store(env.Clock.Now())
			return nil
		}, time.Second, raw)
		publish(t, env, "work", "m1", nil)
		a.rec.WaitSettled(1)
		if env.Virtual != nil {
			advance(env, d-time.Millisecond)
			if n := len(a.rec.Settlements()); n != 1 {
				t.Fatalf("delivered again %v before its delay", time.Millisecond)
			}
			env.Virtual.Advance(time.Millisecond)
		}
		s := a.rec.WaitSettled(2)
		expectActions(t, s, core.ActRetryAfter, core.ActAck)
		if waited := second.Load().(time.Time).Sub(first); waited < d {
			t.Fatalf("delivered again after %v, before the delay of %v", waited, d)
		}
	}},
	{"CapMovesToDeadLetterWithFinalCount", func(t *testing.T, env Env) {
		a := start(t, env, func(context.Context, *core.Message[string]) error { return core.Retry() }, time.Second,
			raw, core.DeadLetterAfter(3, deadLetter(env, "work.dead")))
		publish(t, env, "work", "m1", nil)
		s := a.rec.WaitSettled(3)
		expectActions(t, s, core.ActRetry, core.ActRetry, core.ActDeadLetter)
		dead := drainAtLeast(t, env, "work.dead", 1)
		a.stop()
		if len(dead) != 1 || string(dead[0].Body) != "m1" || dead[0].Count != 3 {
			t.Fatalf("dead letter %+v, want m1 with count 3", dead)
		}
		if m := drain(t, env, "work"); len(m) != 0 {
			t.Fatalf("queue still holds %d messages", len(m))
		}
		if n := len(a.rec.Settlements()); n != 3 {
			t.Fatalf("%d deliveries, want exactly 3", n)
		}
		expectReason(t, env, dead[0], 3, "retry at attempt 3 of 3")
	}},
	{"DeadLetterAfterOne", func(t *testing.T, env Env) {
		a := start(t, env, func(context.Context, *core.Message[string]) error { return core.Retry() }, time.Second,
			raw, core.DeadLetterAfter(1, deadLetter(env, "work.dead")))
		publish(t, env, "work", "m1", nil)
		a.rec.WaitSettled(1)
		dead := drainAtLeast(t, env, "work.dead", 1)
		if len(dead) != 1 || dead[0].Count != 1 {
			t.Fatalf("dead letter %+v, want one with count 1", dead)
		}
		a.stop()
		if n := len(a.rec.Settlements()); n != 1 {
			t.Fatalf("%d deliveries, want 1", n)
		}
		expectReason(t, env, dead[0], 1, "retry at attempt 1 of 1")
	}},
	{"CapStopsDelayedLoop", func(t *testing.T, env Env) {
		d := delay(env)
		a := start(t, env, func(context.Context, *core.Message[string]) error { return core.RetryAfter(d) }, time.Second,
			raw, core.DeadLetterAfter(2, deadLetter(env, "work.dead")))
		publish(t, env, "work", "m1", nil)
		a.rec.WaitSettled(1)
		advance(env, d)
		a.rec.WaitSettled(2)
		dead := drainAtLeast(t, env, "work.dead", 1)
		if len(dead) != 1 || dead[0].Count != 2 {
			t.Fatalf("dead letter %+v, want one with count 2", dead)
		}
		expectReason(t, env, dead[0], 2, "retry_after(")
	}},
	{"NeverSettledGoesToDeadLetterAfterCap", func(t *testing.T, env Env) {
		if !env.Features.CountsAtTake {
			t.Skip("the backend counts settled attempts only: an abandoned delivery does not spend one")
		}
		// Every delivery is abandoned (the handler never returns before the App stops), as a
		// process that dies in its handler leaves it: once the attempts are spent, the message
		// goes to the dead letter without its handler running again.
		const cap = 2
		shutdown := shutdownTimeout(env)
		for i := 1; i <= cap; i++ {
			entered := make(chan int, 1)
			a := start(t, env, func(ctx context.Context, m *core.Message[string]) error {
				entered <- m.Attempt()
				<-ctx.Done()
				return ctx.Err()
			}, shutdown, raw, core.DeadLetterAfter(cap, deadLetter(env, "work.dead")))
			if i == 1 {
				publish(t, env, "work", "m1", nil) // once the first App has declared the queue
			}
			if got := <-entered; got != i {
				t.Fatalf("delivery %d came as attempt %d", i, got)
			}
			stopAbandoning(t, env, a, shutdown)
			expectActions(t, a.rec.Settlements(), core.ActAbandon)
		}
		called := make(chan int, 1)
		b := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			called <- m.Attempt()
			return nil
		}, time.Second, raw, core.DeadLetterAfter(cap, deadLetter(env, "work.dead")))
		s := b.rec.WaitSettled(1)
		expectActions(t, s, core.ActDeadLetter)
		if got := s[0].Delivery.Attempt(); got != cap+1 {
			t.Fatalf("moved at attempt %d, want %d", got, cap+1)
		}
		select {
		case n := <-called:
			t.Fatalf("the handler ran for attempt %d, past the cap", n)
		default:
		}
		dead := drainAtLeast(t, env, "work.dead", 1)
		b.stop()
		if len(dead) != 1 || string(dead[0].Body) != "m1" {
			t.Fatalf("dead letter %+v, want m1", dead)
		}
		expectReason(t, env, dead[0], cap+1, "not settled after 2 attempts")
	}},
	{"UndecodableGoesToDeadLetter", func(t *testing.T, env Env) {
		type refund struct{ ID string }
		a := start(t, env, func(context.Context, *core.Message[refund]) error { return nil }, time.Second,
			core.DeadLetterAfter(5, deadLetter(env, "work.dead")))
		publish(t, env, "work", "{not json", nil)
		s := a.rec.WaitSettled(1)
		expectActions(t, s, core.ActDeadLetter)
		dead := drainAtLeast(t, env, "work.dead", 1)
		if len(dead) != 1 || string(dead[0].Body) != "{not json" {
			t.Fatalf("dead letter %+v", dead)
		}
		expectReason(t, env, dead[0], 1, "decod")
	}},
	{"HeadersSurviveRetry", func(t *testing.T, env Env) {
		if env.Features.NoHeaders {
			t.Skip("backend carries no headers")
		}
		seen := make(chan map[string]string, 2)
		a := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			seen <- m.Headers()
			if m.Attempt() == 1 {
				return core.Retry()
			}
			return nil
		}, time.Second, raw, core.DeadLetterAfter(5, deadLetter(env, "work.dead")))
		publish(t, env, "work", "m1", map[string]string{"tenant": "acme", "trace": "t-1"})
		a.rec.WaitSettled(2)
		<-seen
		h := <-seen
		if h["tenant"] != "acme" || h["trace"] != "t-1" {
			t.Fatalf("headers on the retried delivery: %v", h)
		}
	}},
	{"AbandonedComesBack", func(t *testing.T, env Env) {
		entered := make(chan struct{}, 1)
		shutdown := shutdownTimeout(env)
		a := start(t, env, func(ctx context.Context, m *core.Message[string]) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}, shutdown, raw)
		publish(t, env, "work", "m1", nil)
		<-entered
		stopAbandoning(t, env, a, shutdown)
		expectActions(t, a.rec.Settlements(), core.ActAbandon)

		got := make(chan string, 1)
		b := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			got <- m.Payload
			return nil
		}, time.Second, raw)
		expectActions(t, b.rec.WaitSettled(1), core.ActAck)
		if body := <-got; body != "m1" {
			t.Fatalf("came back as %q", body)
		}
	}},
	{"WorkersBound", func(t *testing.T, env Env) {
		const workers, total = 3, 8
		var active, peak atomic.Int32
		entered := make(chan struct{}, total)
		release := make(chan struct{})
		a := start(t, env, func(context.Context, *core.Message[string]) error {
			n := active.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			entered <- struct{}{}
			<-release
			active.Add(-1)
			return nil
		}, time.Second, raw, core.Workers(workers))
		for i := range total {
			publish(t, env, "work", "m"+string(rune('0'+i)), nil)
		}
		for range workers {
			<-entered
		}
		close(release)
		a.rec.WaitSettled(total)
		if p := peak.Load(); p != workers {
			t.Fatalf("peak concurrency %d with Workers(%d)", p, workers)
		}
	}},
	{"EveryMessageSettledOnce", func(t *testing.T, env Env) {
		const total = 20
		a := start(t, env, func(_ context.Context, m *core.Message[string]) error {
			if m.Attempt() == 1 && m.Payload[len(m.Payload)-1]%2 == 0 {
				return core.Retry()
			}
			return nil
		}, time.Second, raw, core.Workers(4), core.DeadLetterAfter(3, deadLetter(env, "work.dead")))
		want := map[string]bool{}
		for i := range total {
			body := "m" + string(rune('a'+i))
			want[body] = true
			publish(t, env, "work", body, nil)
		}
		acked := map[string]int{}
		a.rec.WaitFor(func(s []core.Settlement) bool {
			n := 0
			for _, x := range s {
				if x.Verdict.Action == core.ActAck {
					n++
				}
			}
			return n >= total
		})
		for _, s := range a.rec.Settlements() {
			if s.Verdict.Action == core.ActAck {
				acked[string(s.Delivery.Body())]++
			}
		}
		for body := range want {
			if acked[body] != 1 {
				t.Errorf("%s acked %d times", body, acked[body])
			}
		}
		if len(acked) != total {
			t.Errorf("acked %v", slices.Sorted(maps.Keys(acked)))
		}
	}},
}
