package core_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

func ackBatch(context.Context, []*core.Message[Refund]) error { return nil }

func TestBatchOptionsAreChecked(t *testing.T) {
	h := coretest.New(t)
	ep := h.Broker.Queue("refunds")
	pub, err := core.NewPublisher[Refund](h.Broker.Queue("payouts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"single with BatchSize", core.Subscribe(h.App, ep, ack, core.BatchSize(10)), "core.BatchSize applies to batch subscriptions only"},
		{"single with BatchWait", core.Subscribe(h.App, ep, ack, core.BatchWait(time.Second)), "core.BatchWait applies to batch subscriptions only"},
		{"BatchSize(0)", core.SubscribeBatch(h.App, ep, ackBatch, core.BatchSize(0)), "BatchSize(0)"},
		{"BatchWait(0)", core.SubscribeBatch(h.App, ep, ackBatch, core.BatchWait(0)), "BatchWait(0s)"},
		{"middleware", core.SubscribeBatch(h.App, ep, ackBatch, core.Use(func(n core.HandlerFunc) core.HandlerFunc { return n })), "core.Use does not apply to a batch handler"},
		{"replies", core.SubscribeBatch(h.App, ep, ackBatch, core.Replies(pub)), "core.Replies does not apply to a batch handler"},
		{"nil handler", core.SubscribeBatch[Refund](h.App, ep, nil), "nil handler"},
		{"nil endpoint", core.SubscribeBatch(h.App, nil, ackBatch), "nil endpoint"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, c.err, c.want)
		}
	}
}

func TestBatchSaysTheAppsMiddlewareDoesNotWrapIt(t *testing.T) {
	wrapped := 0
	h := coretest.New(t, core.WithMiddleware(func(next core.HandlerFunc) core.HandlerFunc {
		return func(ctx context.Context, d core.Delivery) error { wrapped++; return next(ctx, d) }
	}))
	coretest.SubscribeBatch(h, "refunds", ackBatch)
	h.Start()
	h.Publish("refunds", Refund{ID: "r"})
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := h.Clock.BlockUntil(ctx, 1); err != nil { // the batch's wait
		t.Fatal(err)
	}
	h.Advance(core.DefaultBatchWait)
	h.WaitSettled(1)
	if wrapped != 0 {
		t.Fatalf("the App's middleware ran %d times around a batch handler", wrapped)
	}
	if len(h.Logs.Find("settle: the App's middleware does not wrap a batch handler; its messages' settlements still reach the observers")) != 1 {
		t.Fatal("no line says the App's middleware does not wrap the batch handler")
	}
}

func TestBatchResultMisuse(t *testing.T) {
	for _, c := range []struct {
		name string
		r    *core.BatchResult
		n    int
		want string
	}{
		{"short", core.NewBatchResult(1).Ack(0), 2, "length"},
		{"out of range", core.NewBatchResult(2).Ack(0).Ack(2), 2, "element 2 is out of range"},
		{"twice", core.NewBatchResult(2).Ack(0).Drop(0), 2, "element 0 is answered twice"},
		{"never", core.NewBatchResult(2).Ack(0), 2, "element 1 is never answered"},
		{"nil failure", core.NewBatchResult(1).Fail(0, nil), 1, "use Ack"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := coretest.New(t)
			coretest.SubscribeBatch(h, "refunds", func(_ context.Context, ms []*core.Message[Refund]) error {
				if ms[0].Attempt() == 1 {
					return c.r
				}
				return nil
			}, core.BatchSize(c.n), core.BatchWait(time.Second), core.OnError(core.PolicyDrop)) // a misfit retries, whatever the policy
			for range c.n {
				h.Publish("refunds", Refund{ID: "r"})
			}
			h.Start()
			s := h.WaitSettled(c.n)
			for _, x := range s[:c.n] {
				var e *core.BatchResultError
				if x.Verdict.Action != core.ActRetry || !errors.As(x.Verdict.Cause, &e) || !strings.Contains(e.Problem, c.want) {
					t.Fatalf("verdict %v (cause %v), want a retry for a result whose problem says %q", x.Verdict, x.Verdict.Cause, c.want)
				}
				if e.Batch != c.n {
					t.Fatalf("the error counts a batch of %d, want %d", e.Batch, c.n)
				}
			}
			logs := h.Logs.Find("settle: batch handler's result does not fit its batch; retrying the batch")
			if len(logs) == 0 || logs[0].Attrs["batch"] != int64(c.n) || logs[0].Attrs["problem"] == "" {
				t.Fatalf("warnings of the misfit result %v, want one with the batch's count", logs)
			}
		})
	}
}

func TestBatchPanicTakesThePanicPolicyForEach(t *testing.T) {
	h := coretest.New(t)
	coretest.SubscribeBatch(h, "refunds", func(context.Context, []*core.Message[Refund]) error {
		panic("boom")
	}, core.BatchSize(3), core.OnPanic(core.PolicyDeadLetter), core.DeadLetterAfter(5, "refunds.dead"))
	for range 3 {
		h.Publish("refunds", Refund{ID: "r"})
	}
	h.Start()
	for _, x := range h.WaitSettled(3) {
		var pe *core.PanicError
		if x.Verdict.Action != core.ActDeadLetter || !errors.As(x.Verdict.Cause, &pe) {
			t.Fatalf("verdict %v (cause %v), want the panic policy's dead letter", x.Verdict, x.Verdict.Cause)
		}
	}
	if got := len(h.DeadLetters("refunds.dead")); got != 3 {
		t.Fatalf("%d dead letters, want the batch's 3", got)
	}
}

func TestBatchSettlesTogether(t *testing.T) {
	h := coretest.New(t)
	var mu sync.Mutex
	var sizes []int
	coretest.SubscribeBatch(h, "refunds", func(_ context.Context, ms []*core.Message[Refund]) error {
		mu.Lock()
		sizes = append(sizes, len(ms))
		mu.Unlock()
		return nil
	}, core.BatchSize(4), core.BatchWait(time.Second))
	for range 8 {
		h.Publish("refunds", Refund{ID: "r"})
	}
	h.Start()
	h.WaitSettled(8)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{4, 4}) {
		t.Fatalf("batches of %v, want [4 4]", sizes)
	}
	if n := h.Broker.Batches(); n != 2 {
		t.Fatalf("the broker settled %d batches together, want 2", n)
	}
}

// TestBatchSuspectRunsAlone: a suspect delivery taken while a batch fills ends that batch and
// runs in a batch of its own, with nothing else of the subscription running beside it.
func TestBatchSuspectRunsAlone(t *testing.T) {
	h := coretest.New(t)
	ds := []core.Delivery{suspectDelivery{"a", false}, suspectDelivery{"b", false}, suspectDelivery{"s", true},
		suspectDelivery{"c", false}, suspectDelivery{"d", false}}
	var mu sync.Mutex
	var batches []string
	running := 0
	err := core.SubscribeBatch(h.App, &listEndpoint{ds: ds}, func(_ context.Context, ms []*core.Message[Refund]) error {
		ids := ""
		for _, m := range ms {
			ids += m.ID()
		}
		mu.Lock()
		running++
		if strings.Contains(ids, "s") && running != 1 {
			t.Errorf("the suspect's batch %q ran beside %d others", ids, running-1)
		}
		batches = append(batches, ids)
		mu.Unlock()
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}, core.BatchSize(10), core.BatchWait(time.Second), core.Workers(2))
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	// a, b are taken, then s ends their batch at once; c and d fill the next one until its wait
	// ends.
	h.WaitSettled(3)
	if err := h.Clock.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("no batch wait armed: %v", err)
	}
	h.Advance(time.Second)
	h.WaitSettled(5)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(batches, []string{"ab", "s", "cd"}) {
		t.Fatalf("batches %q, want [ab s cd]", batches)
	}
}

// BenchmarkBatchDispatch compares a batch subscription with a single-message one on the
// in-memory backend: the same messages, a no-op handler, one worker; ns/op and allocs/op are
// per message.
func BenchmarkBatchDispatch(b *testing.B) {
	for _, size := range []int{0, 10, 100} {
		name := "single"
		if size > 0 {
			name = "batch=" + strconv.Itoa(size)
		}
		b.Run(name, func(b *testing.B) {
			queues := coretest.NewBroker(clock.Real(), nil)
			app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
			app.Register(queues)
			var done atomic.Int64
			finished := make(chan struct{})
			count := func(n int) {
				if done.Add(int64(n)) == int64(b.N) {
					close(finished)
				}
			}
			var err error
			if size == 0 {
				err = core.Subscribe(app, queues.Queue("q"), func(context.Context, *core.Message[[]byte]) error { count(1); return nil },
					core.WithCodec(core.Raw))
			} else {
				err = core.SubscribeBatch(app, queues.Queue("q"), func(_ context.Context, ms []*core.Message[[]byte]) error { count(len(ms)); return nil },
					core.WithCodec(core.Raw), core.BatchSize(size), core.BatchWait(time.Millisecond))
			}
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				queues.Publish("q", []byte("r-1"), nil)
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

// TestBatchAdmitsEachMessage: each delivery of a batch is charged and checked against the cap
// on its own; one whose Charge fails is abandoned and one past the cap is dead-lettered, neither
// entering the batch, and the others go to the handler together.
func TestBatchAdmitsEachMessage(t *testing.T) {
	h := coretest.New(t)
	charged := make(chan string, 4)
	ds := []core.Delivery{
		chargedDelivery{suspectDelivery{"a", false}, 1, false, charged},
		chargedDelivery{suspectDelivery{"fail", false}, 1, true, charged},
		chargedDelivery{suspectDelivery{"past", false}, 4, false, charged},
		chargedDelivery{suspectDelivery{"b", false}, 2, false, charged},
	}
	batches := make(chan string, 4)
	err := core.SubscribeBatch(h.App, &listEndpoint{ds: ds}, func(_ context.Context, ms []*core.Message[Refund]) error {
		ids := ""
		for _, m := range ms {
			ids += m.ID()
		}
		batches <- ids
		return nil
	}, core.BatchSize(4), core.DeadLetterAfter(3, "refunds.dead"))
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	byID := map[string]core.Verdict{}
	for _, x := range h.WaitSettled(4) {
		byID[x.Delivery.ID()] = x.Verdict
	}
	if ids := <-batches; ids != "ab" {
		t.Fatalf("the handler got %q, want the batch ab", ids)
	}
	if len(charged) != 4 {
		t.Fatalf("charged %d deliveries, want all 4", len(charged))
	}
	if v := byID["fail"]; v.Action != core.ActAbandon {
		t.Errorf("a delivery whose Charge failed: %v; want it abandoned", v)
	}
	if v := byID["past"]; v.Action != core.ActDeadLetter || !strings.Contains(core.Reason(v), "not settled after 3 attempts") {
		t.Errorf("a delivery past the cap: %v (%s); want a dead letter, not settled", v, core.Reason(v))
	}
	if byID["a"].Action != core.ActAck || byID["b"].Action != core.ActAck {
		t.Errorf("the batch's verdicts: a %v, b %v; want both acked", byID["a"], byID["b"])
	}
}

func TestDescribeBatchSubscription(t *testing.T) {
	h := coretest.New(t)
	coretest.SubscribeBatch(h, "refunds", ackBatch, core.BatchSize(50), core.BatchWait(time.Second))
	coretest.Subscribe(h, "payouts", ack)
	d := h.App.Describe()
	if len(d.Subscriptions) != 2 {
		t.Fatalf("described %d subscriptions, want 2", len(d.Subscriptions))
	}
	b, s := d.Subscriptions[0], d.Subscriptions[1]
	if b.Payload != reflect.TypeFor[Refund]() || b.BatchSize != 50 || b.BatchWait != time.Second {
		t.Errorf("batch subscription described as payload %v, batch %d, wait %v; want Refund, 50, 1s", b.Payload, b.BatchSize, b.BatchWait)
	}
	if s.BatchSize != 0 || s.BatchWait != 0 {
		t.Errorf("single-message subscription described with batch %d, wait %v", s.BatchSize, s.BatchWait)
	}
}
