package settleotel_test

import (
	"context"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
	settleotel "github.com/settlehq/settle/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

// publishTraced publishes a message from inside a producer span, through the Telemetry's
// propagator as a publisher does, and returns the producer's span context.
func publishTraced(t *testing.T, r *rig, queue string) (trace.SpanContext, string) {
	t.Helper()
	ctx, producer := r.tp.Tracer("test").Start(context.Background(), "publish "+queue, trace.WithSpanKind(trace.SpanKindProducer))
	headers := core.InjectHeaders(ctx, r.tel.Propagator(), map[string]string{"k": "v"})
	producer.End()
	if headers["traceparent"] == "" || headers["k"] != "v" {
		t.Fatalf("injected headers %v", headers)
	}
	return producer.SpanContext(), r.PublishRaw(queue, []byte(`{"id":"r-1"}`), headers)
}

func TestConsumerSpanLinksToTheProducerByDefault(t *testing.T) {
	r := newRig(t)
	downstream := make(chan map[string]string, 1)
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		// What the handler publishes carries the handler's span: the App's contexts carry the
		// propagator.
		downstream <- core.InjectHeaders(ctx, nil, nil)
		return nil
	})
	r.Start()
	producer, id := publishTraced(t, r, "refunds")
	r.settled(1)
	s := r.span(id, 1)
	if s.Parent.IsValid() {
		t.Fatalf("linked span has a parent %v", s.Parent)
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != producer.SpanID() || s.Links[0].SpanContext.TraceID() != producer.TraceID() {
		t.Fatalf("links %+v, want the producer %v", s.Links, producer)
	}
	if s.SpanContext.TraceID() == producer.TraceID() {
		t.Fatal("the linked span joined the producer's trace")
	}
	h := <-downstream
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(h)))
	if got.SpanID() != s.SpanContext.SpanID() || got.TraceID() != s.SpanContext.TraceID() {
		t.Fatalf("downstream traceparent %q is not the delivery's span %v", h["traceparent"], s.SpanContext)
	}
}

func TestConsumerSpanIsTheProducersChildWhenAsked(t *testing.T) {
	r := newRig(t, settleotel.ChildOfProducer())
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error { return nil })
	r.Start()
	producer, id := publishTraced(t, r, "refunds")
	r.settled(1)
	s := r.span(id, 1)
	if s.Parent.SpanID() != producer.SpanID() || s.SpanContext.TraceID() != producer.TraceID() || !s.Parent.IsRemote() {
		t.Fatalf("parent %v trace %v, want the producer %v", s.Parent, s.SpanContext.TraceID(), producer)
	}
	if len(s.Links) != 0 {
		t.Fatalf("links %v", s.Links)
	}
}

func TestQueueDepthGaugesFromOpsStats(t *testing.T) {
	r := newRig(t)
	for range 3 {
		r.Publish("refunds", Refund{ID: "r"})
	}
	r.Broker.PublishDead("refunds.dead", []byte(`{}`), nil)
	reg, err := r.tel.ObserveQueues(r.Broker.Ops("refunds", "refunds.dead"), r.Broker.Ops("payouts", ""))
	if err != nil {
		t.Fatal(err)
	}
	ms := r.metrics()
	got := map[string]int64{}
	for _, p := range ms[settleotel.MetricQueueMessages].Data.(metricdata.Gauge[int64]).DataPoints {
		a := attrs(p.Attributes.ToSlice())
		got[a["messaging.destination.name"]+"/"+a["settle.state"]] = p.Value
	}
	// The in-memory broker cannot measure its delayed copies (ops.Stats.Unmeasured): no point,
	// rather than a false zero; a queue without a dead letter has no dead point.
	if st, _ := r.Broker.Ops("refunds", "").Stats(context.Background()); st.Measured(ops.FigureDelayed) {
		t.Fatal("the in-memory broker measures delayed copies now: add them to want")
	}
	want := map[string]int64{"refunds/ready": 3, "refunds/in_flight": 0, "refunds/dead": 1, "payouts/ready": 0, "payouts/in_flight": 0}
	if len(got) != len(want) {
		t.Errorf("depth points %v, want %v", got, want)
	}
	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s = %d (%v), want %d", k, n, ok, v)
		}
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.metrics()[settleotel.MetricQueueMessages]; ok {
		t.Error("gauges still observed after Unregister")
	}
	if _, err := r.tel.ObserveQueues(nil); err == nil {
		t.Error("a nil queue was accepted")
	}
}
