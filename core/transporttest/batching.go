package transporttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// The "Batch" section proves batch subscriptions (core.SubscribeBatch) on the backend: one
// outcome for a batch, one per message (retry-after and drop included), a payload that does not
// decode kept out of its batch, a partial batch after the wait, the cap and dead letter per
// message, and a result that does not fit its batch retrying the batch. It runs as
// Features.Batch declares: Undeclared skips, naming the capability.
var batching = []testCase{
	{"AckAll", func(t *testing.T, env Env) {
		requireBatch(t, env)
		for _, b := range []string{"m1", "m2", "m3"} {
			publish(t, env, "work", b, nil)
		}
		var calls batchCalls
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			calls.add(ms)
			return nil
		}, core.BatchSize(3), core.BatchWait(batchWait(env)))
		s := settledAdvancing(t, env, a, 3, batchWait(env))
		expectActions(t, s, core.ActAck, core.ActAck, core.ActAck)
		calls.expectSeen(t, 3, 3)
		a.stop()
		if m := drain(t, env, "work"); len(m) != 0 {
			t.Fatalf("queue holds %d messages after the batch was acknowledged", len(m))
		}
	}},
	{"OneOutcomeForAll", func(t *testing.T, env Env) {
		requireBatch(t, env)
		publish(t, env, "work", "m1", nil)
		publish(t, env, "work", "m2", nil)
		// One outcome for the whole batch: a retry while any of its messages is on its first
		// attempt (a backend may split the two messages into batches of their own).
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			if firstAttempt(ms) {
				return core.Retry()
			}
			return nil
		}, core.BatchSize(2), core.BatchWait(batchWait(env)))
		s := untilAdvancing(t, env, a, batchWait(env), ackedOnce("m1", "m2"))
		for _, b := range []string{"m1", "m2"} {
			expectRetriedThenAcked(t, s, b, nil)
		}
	}},
	{"PerMessageResult", func(t *testing.T, env Env) {
		requireBatch(t, env)
		d := delay(env)
		for _, b := range []string{"ack", "retry", "later", "drop"} {
			publish(t, env, "work", b, nil)
		}
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			r := core.NewBatchResult(len(ms))
			for i, m := range ms {
				switch {
				case m.Attempt() > 1, m.Payload == "ack":
					r.Ack(i)
				case m.Payload == "retry":
					r.Retry(i)
				case m.Payload == "later":
					r.RetryAfter(i, d)
				default:
					r.Drop(i)
				}
			}
			return r
		}, core.BatchSize(4), core.BatchWait(batchWait(env)))
		s := settledAdvancing(t, env, a, 6, d) // on a virtual clock, releases the retry-after and partial batches
		want := map[string][]core.Action{
			"ack": {core.ActAck}, "retry": {core.ActRetry, core.ActAck},
			"later": {core.ActRetryAfter, core.ActAck}, "drop": {core.ActDrop},
		}
		for body, w := range want {
			if got := actionsOf(s, body); !slices.Equal(got, w) {
				t.Fatalf("%q: verdicts %v, want %v", body, got, w)
			}
		}
		if v := verdictOf(s, "later"); v.Delay != d {
			t.Fatalf("retry-after's delay %v, want %v", v.Delay, d)
		}
	}},
	{"DecodeFailureStaysOut", func(t *testing.T, env Env) {
		requireBatch(t, env)
		publish(t, env, "work", `{"n":1}`, nil)
		publish(t, env, "work", `not json`, nil)
		publish(t, env, "work", `{"n":2}`, nil)
		var calls batchCalls
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[struct{ N int }]) error {
			calls.add(ms)
			return nil
		}, core.BatchSize(3), core.BatchWait(batchWait(env)), core.WithCodec(core.JSON), core.DeadLetterAfter(3, deadLetter(env, "work.dead")))
		settledAdvancing(t, env, a, 3, batchWait(env))
		calls.expectSeen(t, 2, 3)
		a.stop()
		dead := drainAtLeast(t, env, "work.dead", 1)
		if len(dead) != 1 || string(dead[0].Body) != "not json" {
			t.Fatalf("dead letters %v, want the payload that does not decode", bodies(dead))
		}
		expectReason(t, env, dead[0], 1, "decod")
	}},
	{"PartialBatchAfterWait", func(t *testing.T, env Env) {
		requireBatch(t, env)
		w := batchWait(env)
		publish(t, env, "work", "m1", nil)
		publish(t, env, "work", "m2", nil)
		start := env.Clock.Now()
		called := make(chan int, 1)
		var at time.Time
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			at = env.Clock.Now()
			called <- len(ms)
			return nil
		}, core.BatchSize(10), core.BatchWait(w))
		n := waitCalled(t, env, called, w)
		a.rec.WaitSettled(2)
		if n != 2 {
			t.Fatalf("the handler got a batch of %d, want the partial batch of 2 the queue held", n)
		}
		if waited := at.Sub(start); waited < w {
			t.Fatalf("the partial batch went to the handler after %v, before its wait of %v", waited, w)
		}
	}},
	{"CapAndDeadLetterPerMessage", func(t *testing.T, env Env) {
		requireBatch(t, env)
		for _, b := range []string{"ok1", "bad", "ok2"} {
			publish(t, env, "work", b, nil)
		}
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			r := core.NewBatchResult(len(ms))
			for i, m := range ms {
				if m.Payload == "bad" {
					r.Fail(i, errors.New("bad row"))
				} else {
					r.Ack(i)
				}
			}
			return r
		}, core.BatchSize(3), core.BatchWait(batchWait(env)), core.DeadLetterAfter(2, deadLetter(env, "work.dead")))
		s := settledAdvancing(t, env, a, 4, batchWait(env))
		if got := actionsOf(s, "bad"); !slices.Equal(got, []core.Action{core.ActRetry, core.ActDeadLetter}) {
			t.Fatalf("the failing message: verdicts %v, want [retry dead_letter]", got)
		}
		for _, b := range []string{"ok1", "ok2"} {
			if got := actionsOf(s, b); !slices.Equal(got, []core.Action{core.ActAck}) {
				t.Fatalf("%q: verdicts %v, want [ack]", b, got)
			}
		}
		a.stop()
		dead := drainAtLeast(t, env, "work.dead", 1)
		if len(dead) != 1 || string(dead[0].Body) != "bad" {
			t.Fatalf("dead letters %v, want the failing message alone", bodies(dead))
		}
		expectReason(t, env, dead[0], 2, "bad row")
	}},
	{"WrongLengthRetriesBatch", func(t *testing.T, env Env) {
		requireBatch(t, env)
		publish(t, env, "work", "m1", nil)
		publish(t, env, "work", "m2", nil)
		a := startBatch(t, env, func(_ context.Context, ms []*core.Message[string]) error {
			if firstAttempt(ms) {
				return core.NewBatchResult(len(ms) + 1) // answers for a message it was not given
			}
			return nil
		}, core.BatchSize(2), core.BatchWait(batchWait(env)))
		s := untilAdvancing(t, env, a, batchWait(env), ackedOnce("m1", "m2"))
		for _, b := range []string{"m1", "m2"} {
			expectRetriedThenAcked(t, s, b, func(cause error) bool {
				var e *core.BatchResultError
				return errors.As(cause, &e)
			})
		}
	}},
	{"Refused", func(t *testing.T, env Env) {
		if env.Features.Batch != Refused {
			t.Skipf("Features.Batch is %v: this case proves a refusal", env.Features.Batch)
		}
		a := core.New(core.WithClock(env.Clock), core.WithLogger(logger(t)), core.WithoutSignals())
		env.Backend.Register(a)
		if err := core.SubscribeBatch(a, env.Backend.Endpoint("work"), func(context.Context, []*core.Message[string]) error { return nil }); err != nil {
			t.Fatalf("SubscribeBatch: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
		defer cancel()
		if err := a.Run(ctx); !errors.Is(err, core.ErrUnsupported) {
			t.Fatalf("Run with a batch subscription: %v, want an error matching core.ErrUnsupported", err)
		}
	}},
}

// requireBatch skips the case unless the backend declares batch subscriptions Supported.
func requireBatch(t *testing.T, env Env) {
	t.Helper()
	switch env.Features.Batch {
	case Undeclared:
		t.Skip("Features.Batch is not declared: set it to transporttest.Supported once batch subscriptions (core.SubscribeBatch) run on the backend, or to transporttest.Refused if its endpoints refuse them with core.ErrUnsupported")
	case Refused:
		t.Skip("Features.Batch is Refused: the Refused case proves the refusal")
	}
}

// startBatch runs one App with the batch handler h on the logical queue "work".
func startBatch[T any](t *testing.T, env Env, h core.BatchHandler[T], opts ...core.Option) *app {
	t.Helper()
	opts = append([]core.Option{raw}, opts...)
	return startApp(t, env, time.Second, func(a *core.App) {
		if err := core.SubscribeBatch(a, env.Backend.Endpoint("work"), h, opts...); err != nil {
			t.Fatalf("SubscribeBatch: %v", err)
		}
	})
}

// batchWait is the BatchWait the cases give: on real time long enough for a backend's prefetch
// to hand out what its queue holds.
func batchWait(env Env) time.Duration {
	if env.Virtual != nil {
		return 5 * time.Second
	}
	return Delay
}

// waitCalled waits for the handler's first call and returns what it sent; on a virtual clock it
// moves the clock on by the wait until the call comes (the wait's timer is armed by the worker,
// at a moment the test cannot see).
func waitCalled(t *testing.T, env Env, called <-chan int, w time.Duration) int {
	t.Helper()
	deadline := time.After(coretest.WaitTimeout)
	for {
		tick := time.After(10 * time.Millisecond)
		select {
		case n := <-called:
			return n
		case <-deadline:
			t.Fatalf("the batch handler was not called within %v", coretest.WaitTimeout)
		case <-tick:
			advance(env, w)
		}
	}
}

// firstAttempt reports whether any message of a batch is on its first attempt.
func firstAttempt(ms []*core.Message[string]) bool {
	for _, m := range ms {
		if m.Attempt() == 1 {
			return true
		}
	}
	return false
}

// ackedOnce is a condition on settlements: every message with one of the bodies was acked.
func ackedOnce(bodies ...string) func([]core.Settlement) bool {
	return func(s []core.Settlement) bool {
		for _, b := range bodies {
			if !slices.Contains(actionsOf(s, b), core.ActAck) {
				return false
			}
		}
		return true
	}
}

// expectRetriedThenAcked checks that the message with the body was retried at least once, each
// retry's cause satisfying cause (when given), and then acknowledged once, last.
func expectRetriedThenAcked(t *testing.T, s []core.Settlement, body string, cause func(error) bool) {
	t.Helper()
	var got []core.Action
	for _, x := range s {
		if string(x.Delivery.Body()) != body {
			continue
		}
		got = append(got, x.Verdict.Action)
		if x.Verdict.Action == core.ActRetry && cause != nil && !cause(x.Verdict.Cause) {
			t.Fatalf("%q: a retry's cause is %v", body, x.Verdict.Cause)
		}
	}
	n := len(got)
	if n < 2 || got[n-1] != core.ActAck || slices.ContainsFunc(got[:n-1], func(a core.Action) bool { return a != core.ActRetry }) {
		t.Fatalf("%q: verdicts %v, want retries then one ack", body, got)
	}
}

// untilAdvancing waits until cond holds for a's settlements and returns them; on a virtual clock
// it moves the clock on by step while it waits (see settledAdvancing).
func untilAdvancing(t *testing.T, env Env, a *app, step time.Duration, cond func([]core.Settlement) bool) []core.Settlement {
	t.Helper()
	deadline := time.After(coretest.WaitTimeout)
	for {
		if s := a.rec.Settlements(); cond(s) {
			return s
		}
		select {
		case <-deadline:
			t.Fatalf("settlements %v within %v: not what the case waits for", actions(a.rec.Settlements()), coretest.WaitTimeout)
		case <-time.After(10 * time.Millisecond):
			advance(env, step)
		}
	}
}

// settledAdvancing waits until a has recorded n settlements and returns them; on a virtual
// clock it moves the clock on by step while it waits, which ends the wait of a partial batch (a
// redelivered message alone) and releases retry-after copies.
func settledAdvancing(t *testing.T, env Env, a *app, n int, step time.Duration) []core.Settlement {
	t.Helper()
	if env.Virtual == nil {
		return a.rec.WaitSettled(n)
	}
	deadline := time.After(coretest.WaitTimeout)
	for {
		if s := a.rec.Settlements(); len(s) >= n {
			return s
		}
		select {
		case <-deadline:
			t.Fatalf("%d settlements within %v, want %d", len(a.rec.Settlements()), coretest.WaitTimeout, n)
		case <-time.After(10 * time.Millisecond):
			advance(env, step)
		}
	}
}

// batchCalls records the batch sizes a handler was called with.
type batchCalls struct {
	mu    sync.Mutex
	sizes []int
}

func (c *batchCalls) add(ms any) {
	n := 0
	switch ms := ms.(type) {
	case []*core.Message[string]:
		n = len(ms)
	case []*core.Message[struct{ N int }]:
		n = len(ms)
	}
	c.mu.Lock()
	c.sizes = append(c.sizes, n)
	c.mu.Unlock()
}

// expectSeen checks that the handler saw n messages in all, in batches of at most size.
func (c *batchCalls) expectSeen(t *testing.T, n, size int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, s := range c.sizes {
		if s < 1 || s > size {
			t.Fatalf("batches of %v: each should hold 1 to %d messages", c.sizes, size)
		}
		total += s
	}
	if total != n {
		t.Fatalf("the handler saw %d messages (batches of %v), want %d", total, c.sizes, n)
	}
}

// actionsOf returns the verdicts of the deliveries whose body is body, in settlement order.
func actionsOf(s []core.Settlement, body string) []core.Action {
	var out []core.Action
	for _, x := range s {
		if string(x.Delivery.Body()) == body {
			out = append(out, x.Verdict.Action)
		}
	}
	return out
}

// verdictOf returns the first verdict of the delivery whose body is body.
func verdictOf(s []core.Settlement, body string) core.Verdict {
	for _, x := range s {
		if string(x.Delivery.Body()) == body {
			return x.Verdict
		}
	}
	return core.Verdict{}
}

func bodies(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%q", m.Body)
	}
	return out
}
