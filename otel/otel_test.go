package settleotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	settleotel "github.com/settlehq/settle/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type Refund struct {
	ID string `json:"id"`
}

// rig is a harness on the virtual clock with a Telemetry exporting to memory.
type rig struct {
	*coretest.Harness
	tel    *settleotel.Telemetry
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	done   chan core.Settlement // after the Telemetry has seen each settlement
	events chan core.Event
}

func newRig(t *testing.T, opts ...settleotel.Option) *rig {
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(),
		done: make(chan core.Settlement, 1024), events: make(chan core.Event, 64)}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tel, err := settleotel.New(append([]settleotel.Option{settleotel.WithTracerProvider(r.tp), settleotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	appOpts := append(tel.AppOptions(),
		core.WithObserver(func(s core.Settlement) { r.done <- s }),
		core.WithEventObserver(func(e core.Event) { r.events <- e }))
	r.Harness = coretest.New(t, appOpts...)
	return r
}

// settled waits for n settlements the Telemetry has seen.
func (r *rig) settled(n int) []core.Settlement {
	r.T.Helper()
	var out []core.Settlement
	for range n {
		select {
		case s := <-r.done:
			out = append(out, s)
		case <-time.After(coretest.WaitTimeout):
			r.T.Fatalf("waited %v for %d settlements, saw %d", coretest.WaitTimeout, n, len(out))
		}
	}
	return out
}

// span returns the one ended span of message id at attempt.
func (r *rig) span(id string, attempt int) tracetest.SpanStub {
	r.T.Helper()
	var found []tracetest.SpanStub
	for _, s := range r.spans.GetSpans() {
		a := attrs(s.Attributes)
		if a["messaging.message.id"] == id && a["settle.attempt"] == fmt.Sprint(attempt) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		r.T.Fatalf("%d spans of message %s attempt %d (of %d spans)", len(found), id, attempt, len(r.spans.GetSpans()))
	}
	return found[0]
}

func attrs(kv []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kv))
	for _, a := range kv {
		m[string(a.Key)] = a.Value.String()
	}
	return m
}

// metrics collects the reader's metrics by name.
func (r *rig) metrics() map[string]metricdata.Metrics {
	r.T.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.T.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether a data point's attributes include want.
func matches(set attribute.Set, want map[string]string) bool {
	got := attrs(set.ToSlice())
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// sum adds up the counter points of name whose attributes include want.
func (r *rig) sum(ms map[string]metricdata.Metrics, name string, want map[string]string) int64 {
	var n int64
	if m, ok := ms[name]; ok {
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			if matches(p.Attributes, want) {
				n += p.Value
			}
		}
	}
	return n
}

// histF returns the count and sum of the float histogram points of name matching want.
func histF(ms map[string]metricdata.Metrics, name string, want map[string]string) (uint64, float64) {
	var n uint64
	var s float64
	if m, ok := ms[name]; ok {
		for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			if matches(p.Attributes, want) {
				n += p.Count
				s += p.Sum
			}
		}
	}
	return n, s
}

func histI(ms map[string]metricdata.Metrics, name string, want map[string]string) (uint64, int64) {
	var n uint64
	var s int64
	if m, ok := ms[name]; ok {
		for _, p := range m.Data.(metricdata.Histogram[int64]).DataPoints {
			if matches(p.Attributes, want) {
				n += p.Count
				s += p.Sum
			}
		}
	}
	return n, s
}

// once fails the first attempt with f and acknowledges the next.
func once(f core.Handler[Refund]) core.Handler[Refund] {
	return func(ctx context.Context, m *core.Message[Refund]) error {
		if m.Attempt() == 1 {
			return f(ctx, m)
		}
		return nil
	}
}

// TestEveryOutcomeGivesOneSpanAndItsMetrics runs one message per outcome through its own
// subscription and checks the span (name, kind, attributes, status, start and end on the
// virtual clock) and the metrics each settlement adds.
func TestEveryOutcomeGivesOneSpanAndItsMetrics(t *testing.T) {
	cases := []struct {
		queue   string
		handler func(ctx context.Context, m *core.Message[Refund]) error
		opts    []core.Option
		body    string
		// what the span of attempt 1 says
		handled, outcome, errType string
		status                    codes.Code
		extra                     map[string]string
	}{
		{queue: "ack", handler: func(context.Context, *core.Message[Refund]) error { return nil },
			handled: "ack", outcome: "ack"},
		{queue: "drop", handler: func(context.Context, *core.Message[Refund]) error { return core.Drop() },
			handled: "drop", outcome: "drop"},
		{queue: "retry", handler: once(func(context.Context, *core.Message[Refund]) error { return core.Retry() }),
			handled: "retry", outcome: "retry"},
		{queue: "later", handler: func(context.Context, *core.Message[Refund]) error { return core.RetryAfter(90 * time.Second) },
			handled: "retry_after", outcome: "retry_after", extra: map[string]string{"settle.retry.delay": "90"}},
		{queue: "fails", handler: once(func(context.Context, *core.Message[Refund]) error { return errors.New("card declined") }),
			handled: "error", outcome: "retry", errType: "*errors.errorString", status: codes.Error},
		{queue: "panics", handler: once(func(context.Context, *core.Message[Refund]) error { panic("boom") }),
			handled: "panic", outcome: "retry", errType: "panic", status: codes.Error},
		{queue: "garbled", body: "{not json", handler: func(context.Context, *core.Message[Refund]) error { return nil },
			opts:    []core.Option{core.DeadLetterAfter(3, "garbled.dead")},
			handled: "decode_error", outcome: "dead_letter", errType: "decode_error", status: codes.Error,
			extra: map[string]string{"settle.dead_letter.destination": "garbled.dead"}},
		{queue: "capped", handler: func(context.Context, *core.Message[Refund]) error { return core.Retry() },
			opts:    []core.Option{core.DeadLetterAfter(1, "capped.dead")},
			handled: "retry", outcome: "dead_letter", errType: "dead_letter", status: codes.Error,
			extra: map[string]string{"settle.dead_letter.destination": "capped.dead"}},
		{queue: "slow", handler: func(ctx context.Context, m *core.Message[Refund]) error { <-ctx.Done(); return ctx.Err() },
			opts:    []core.Option{core.Timeout(10 * time.Second), core.OnError(core.PolicyDrop)},
			handled: "timeout", outcome: "drop", errType: "timeout", status: codes.Error},
	}
	r := newRig(t)
	for _, c := range cases {
		coretest.Subscribe(r.Harness, c.queue, c.handler, append([]core.Option{core.Name(c.queue + "-sub")}, c.opts...)...)
	}
	r.Start()
	r.Advance(time.Minute) // messages are published a minute after the epoch
	published := r.Clock.Now()
	ids := map[string]string{}
	for _, c := range cases {
		body := `{"id":"r-1"}`
		if c.body != "" {
			body = c.body
		}
		ids[c.queue] = r.PublishRaw(c.queue, []byte(body), nil)
	}
	// Every handler but the slow one settles at once (retry, fails and panics twice: they ack
	// their second attempt); the slow one is settled by its timeout.
	r.settled(len(cases) - 1 + 3)
	if err := r.Clock.BlockUntil(context.Background(), 3); err != nil { // timeout, grace, retry_after
		t.Fatal(err)
	}
	r.Advance(10 * time.Second)
	r.settled(1)
	settledAt := r.Clock.Now()

	for _, c := range cases {
		s := r.span(ids[c.queue], 1)
		a := attrs(s.Attributes)
		want := map[string]string{
			"messaging.system": "memory", "messaging.destination.name": c.queue, "messaging.destination.subscription.name": c.queue + "-sub",
			"messaging.operation.type": "process", "messaging.operation.name": "process", "settle.handler": c.handled,
			"settle.outcome": c.outcome, "settle.result": "settled", "error.type": c.errType,
		}
		for k, v := range c.extra {
			want[k] = v
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s: span attribute %s = %q, want %q", c.queue, k, a[k], v)
			}
		}
		if s.Name != "process "+c.queue || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("%s: span %q kind %v", c.queue, s.Name, s.SpanKind)
		}
		if s.Status.Code != c.status {
			t.Errorf("%s: status %v (%q), want %v", c.queue, s.Status.Code, s.Status.Description, c.status)
		}
		if !s.StartTime.Equal(published) {
			t.Errorf("%s: span started %v, want %v", c.queue, s.StartTime, published)
		}
		end := published
		if c.queue == "slow" {
			end = settledAt
		}
		if !s.EndTime.Equal(end) {
			t.Errorf("%s: span ended %v, want %v", c.queue, s.EndTime, end)
		}
		if s.Parent.IsValid() || len(s.Links) != 0 {
			t.Errorf("%s: a message published without a trace context has parent %v and links %v", c.queue, s.Parent, s.Links)
		}
	}

	ms := r.metrics()
	for _, c := range cases {
		want := map[string]string{"messaging.destination.name": c.queue, "settle.outcome": c.outcome, "settle.result": "settled"}
		if n := r.sum(ms, settleotel.MetricSettled, want); n != 1 {
			t.Errorf("%s: %s%v = %d, want 1", c.queue, settleotel.MetricSettled, want, n)
		}
		q := map[string]string{"messaging.destination.name": c.queue, "settle.outcome": c.outcome}
		n, sum := histF(ms, settleotel.MetricProcessDuration, q)
		wantDur := 0.0
		if c.queue == "slow" {
			wantDur = 10
		}
		if n != 1 || sum != wantDur {
			t.Errorf("%s: handler duration count %d sum %v, want 1 and %v", c.queue, n, sum, wantDur)
		}
		n, sum = histF(ms, settleotel.MetricLatency, q)
		if n != 1 || sum != wantDur {
			t.Errorf("%s: latency count %d sum %v, want 1 and %v", c.queue, n, sum, wantDur)
		}
		an, asum := histI(ms, settleotel.MetricAttempts, q)
		if an != 1 || asum != 1 {
			t.Errorf("%s: attempts count %d sum %d, want one at attempt 1", c.queue, an, asum)
		}
		dead := int64(0)
		if c.outcome == "dead_letter" {
			dead = 1
		}
		if n := r.sum(ms, settleotel.MetricDeadLetters, map[string]string{"messaging.destination.name": c.queue}); n != dead {
			t.Errorf("%s: dead letters %d, want %d", c.queue, n, dead)
		}
	}
	if n := r.sum(ms, settleotel.MetricOverruns, nil); n != 0 {
		t.Errorf("overruns %d", n)
	}
}

// TestRetriesAreSpansOfTheirOwnAndLatencyCountsFromPublication follows one message through a
// delayed retry to its ack: two spans, and the ack's publish-to-settle latency covers the delay.
func TestRetriesAreSpansOfTheirOwnAndLatencyCountsFromPublication(t *testing.T) {
	r := newRig(t)
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		if m.Attempt() == 1 {
			return core.RetryAfter(time.Minute)
		}
		r.Advance(3 * time.Second) // the handler takes 3 s
		return nil
	})
	r.Start()
	id := r.Publish("refunds", Refund{ID: "r-1"})
	r.settled(1)
	if err := r.Clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r.Advance(time.Minute)
	r.settled(1)
	first, second := r.span(id, 1), r.span(id, 2)
	if first.SpanContext.TraceID() == second.SpanContext.TraceID() {
		t.Error("two deliveries share a trace")
	}
	if got := second.EndTime.Sub(second.StartTime); got != 3*time.Second {
		t.Errorf("second span lasted %v, want 3s", got)
	}
	ms := r.metrics()
	n, sum := histF(ms, settleotel.MetricLatency, map[string]string{"settle.outcome": "ack"})
	if n != 1 || sum != 63 {
		t.Errorf("ack latency count %d sum %v, want 1 and 63 s", n, sum)
	}
	if n, _ := histF(ms, settleotel.MetricLatency, map[string]string{"settle.outcome": "retry_after"}); n != 1 {
		t.Errorf("retry_after latency count %d", n)
	}
	an, asum := histI(ms, settleotel.MetricAttempts, map[string]string{"settle.outcome": "ack"})
	if an != 1 || asum != 2 {
		t.Errorf("ack attempts count %d sum %d, want one at attempt 2", an, asum)
	}
	if n, sum := histF(ms, settleotel.MetricProcessDuration, map[string]string{"settle.outcome": "ack"}); n != 1 || sum != 3 {
		t.Errorf("handler duration count %d sum %v", n, sum)
	}
}

// TestPastTheCapWithoutTheHandlerStillGivesASpan: core sends a delivery past its cap to the dead
// letter without calling the handler; its span is the settlement alone.
func TestPastTheCapWithoutTheHandlerStillGivesASpan(t *testing.T) {
	r := newRig(t)
	called := false
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		called = true
		return nil
	}, core.DeadLetterAfter(3, "refunds.dead"))
	r.Start()
	headers := core.DeadLetterInfo{Count: 5, Origin: "refunds", At: coretest.Epoch}.Headers()
	id := r.Broker.PublishDead("refunds", []byte(`{"id":"r-1"}`), headers)
	r.settled(1)
	if called {
		t.Fatal("the handler ran past the cap")
	}
	s := r.span(id, 5)
	a := attrs(s.Attributes)
	if a["settle.handler"] != "not_called" || a["settle.outcome"] != "dead_letter" || a["error.type"] != "dead_letter" || s.Status.Code != codes.Error {
		t.Fatalf("span %v status %v", a, s.Status)
	}
	if n := newSum(r, settleotel.MetricDeadLetters, map[string]string{"settle.dead_letter.destination": "refunds.dead"}); n != 1 {
		t.Fatalf("dead letters %d", n)
	}
}

func newSum(r *rig, name string, want map[string]string) int64 { return r.sum(r.metrics(), name, want) }

// failingEndpoint reports every settlement of its queue as failed (with err, "connection lost"
// when nil) and lets the test report events as its backend would.
type failingEndpoint struct {
	core.Endpoint
	report chan func(core.Event)
	err    error
}

func (e *failingEndpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := e.Endpoint.Open(ctx, sub)
	e.report <- sub.Report
	fail := e.err
	if fail == nil {
		fail = errors.New("connection lost")
	}
	return src, failingFinisher{fin, fail}, err
}

type failingFinisher struct {
	core.Finisher
	err error
}

func (f failingFinisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	f.Finisher.Finish(ctx, d, v, func(d core.Delivery, v core.Verdict, err error) {
		settled(d, v, f.err)
	})
}

// A settlement whose confirmation was lost is counted as unknown, not failed: its own counter,
// settle.result "unknown" and error.type "settlement_unknown" on the span.
func TestUnknownSettlementsCountedApart(t *testing.T) {
	r := newRig(t)
	ep := &failingEndpoint{Endpoint: r.Broker.Queue("refunds"), report: make(chan func(core.Event), 1),
		err: fmt.Errorf("ack of 1: answer lost: %w", core.ErrSettlementUnknown)}
	if err := core.Subscribe(r.App, ep, func(ctx context.Context, m *core.Message[Refund]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.Start()
	<-ep.report
	id := r.Publish("refunds", Refund{ID: "r-1"})
	r.settled(1)
	s := r.span(id, 1)
	a := attrs(s.Attributes)
	if a["settle.outcome"] != "ack" || a["settle.result"] != "unknown" || a["error.type"] != "settlement_unknown" || s.Status.Code != codes.Error {
		t.Fatalf("span %v status %+v", a, s.Status)
	}
	if e := <-r.events; e.Kind != core.EventSettlementUnknown {
		t.Fatalf("event %+v", e)
	}
	ms := r.metrics()
	q := map[string]string{"messaging.destination.name": "refunds"}
	if n := r.sum(ms, settleotel.MetricSettlementsUnknown, q); n != 1 {
		t.Errorf("%s = %d, want 1", settleotel.MetricSettlementsUnknown, n)
	}
	if n := r.sum(ms, settleotel.MetricSettlementFailures, q); n != 0 {
		t.Errorf("%s = %d, want 0", settleotel.MetricSettlementFailures, n)
	}
	if n := r.sum(ms, settleotel.MetricSettled, map[string]string{"settle.result": "unknown", "settle.outcome": "ack"}); n != 1 {
		t.Errorf("unknown settlements counted %d", n)
	}
}

func TestFailedSettlementsAndBackendEvents(t *testing.T) {
	r := newRig(t)
	ep := &failingEndpoint{Endpoint: r.Broker.Queue("refunds"), report: make(chan func(core.Event), 1)}
	if err := core.Subscribe(r.App, ep, func(ctx context.Context, m *core.Message[Refund]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.Start()
	report := <-ep.report
	id := r.Publish("refunds", Refund{ID: "r-1"})
	r.settled(1)
	s := r.span(id, 1)
	a := attrs(s.Attributes)
	if a["settle.outcome"] != "ack" || a["settle.result"] != "failed" || a["error.type"] != "settlement_failed" ||
		s.Status.Code != codes.Error || s.Status.Description != "settlement failed: connection lost" {
		t.Fatalf("span %v status %+v", a, s.Status)
	}
	report(core.Event{Kind: core.EventCopyRefused, MessageID: id, Attempt: 1})
	report(core.Event{Kind: core.EventReconnected})
	report(core.Event{Kind: core.EventReconnected})
	report(core.Event{Kind: core.EventDiscarded, MessageID: id, Attempt: 21})
	for range 5 { // settlement_failed from core, then the four reported here
		<-r.events
	}
	ms := r.metrics()
	q := map[string]string{"messaging.destination.name": "refunds"}
	for name, want := range map[string]int64{
		settleotel.MetricCopiesRefused: 1, settleotel.MetricReconnects: 2, settleotel.MetricSettlementFailures: 1,
		settleotel.MetricDeadLetters: 0, settleotel.MetricOverruns: 0, settleotel.MetricDiscarded: 1,
	} {
		if n := r.sum(ms, name, q); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
	if n := r.sum(ms, settleotel.MetricSettled, map[string]string{"settle.result": "failed", "settle.outcome": "ack"}); n != 1 {
		t.Errorf("failed settlements counted %d", n)
	}
	if n, _ := histF(ms, settleotel.MetricLatency, nil); n != 0 {
		t.Errorf("a failed settlement recorded a latency")
	}
}

func TestHandlerOverrunIsCounted(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		<-release // ignores its context
		return nil
	}, core.Timeout(10*time.Second))
	r.Start()
	r.Publish("refunds", Refund{ID: "r-1"})
	if err := r.Clock.BlockUntil(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	r.Advance(10*time.Second + core.TimeoutGrace(10*time.Second))
	if e := <-r.events; e.Kind != core.EventHandlerOverran {
		t.Fatalf("event %+v", e)
	}
	close(release)
	r.settled(1)
	if n := newSum(r, settleotel.MetricOverruns, map[string]string{"messaging.destination.name": "refunds"}); n != 1 {
		t.Fatalf("overruns %d", n)
	}
}
