package settleotel_test

import (
	"context"
	"strings"
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

// acmePropagator carries a span context in one header of its own ("acme-trace": trace id and
// span id in hex), the way a service on a propagation format other than W3C's would.
type acmePropagator struct{}

func (acmePropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c.Set("acme-trace", sc.TraceID().String()+"-"+sc.SpanID().String())
	}
}

func (acmePropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	v := c.Get("acme-trace")
	if len(v) != 32+1+16 {
		return ctx
	}
	tid, err1 := trace.TraceIDFromHex(v[:32])
	sid, err2 := trace.SpanIDFromHex(v[33:])
	if err1 != nil || err2 != nil {
		return ctx
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func (acmePropagator) Fields() []string { return []string{"acme-trace"} }

func TestWithPropagatorsWritesAndReadsTheGivenFormat(t *testing.T) {
	r := newRig(t, settleotel.WithPropagators(acmePropagator{}))
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error { return nil })
	r.Start()
	ctx, producer := r.tp.Tracer("test").Start(context.Background(), "publish refunds", trace.WithSpanKind(trace.SpanKindProducer))
	headers := core.InjectHeaders(ctx, r.tel.Propagator(), nil)
	producer.End()
	want := producer.SpanContext().TraceID().String() + "-" + producer.SpanContext().SpanID().String()
	if headers["acme-trace"] != want || headers["traceparent"] != "" {
		t.Fatalf("injected headers %v, want only acme-trace=%s", headers, want)
	}
	id := r.PublishRaw("refunds", []byte(`{"id":"r-1"}`), headers)
	r.settled(1)
	s := r.span(id, 1)
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != producer.SpanContext().SpanID() {
		t.Fatalf("links %+v: the delivery's span did not read the producer from acme-trace", s.Links)
	}
}

func TestWithPropagatorsRefusesNil(t *testing.T) {
	_, err := settleotel.New(settleotel.WithPropagators(nil))
	if err == nil || !strings.Contains(err.Error(), "WithPropagators(nil)") {
		t.Fatalf("New(WithPropagators(nil)) = %v, want an error naming the option", err)
	}
}
