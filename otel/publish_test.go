package settleotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TestPublishSpanCarriedToEveryAttempt publishes through core.Publisher on a traced target from
// inside a span: the publish gets a producer span, the parent's child, and both attempts of the
// message (a retry, then an ack) link to it.
func TestPublishSpanCarriedToEveryAttempt(t *testing.T) {
	r := newRig(t)
	var calls int
	coretest.Subscribe(r.Harness, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		calls++
		if calls == 1 {
			return core.Retry()
		}
		return nil
	})
	r.Start()
	target := r.tel.Target(r.Broker.Queue("refunds"))
	if target.Queue() != "refunds" {
		t.Fatalf("traced target names %q", target.Queue())
	}
	pub, err := core.NewPublisher[Refund](target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "checkout")
	rc, err := pub.Publish(ctx, Refund{ID: "r-1"}, core.MessageID("r-1"))
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	r.settled(2)

	var producer *trace.SpanContext
	for _, s := range r.spans.GetSpans() {
		if s.Name != "send refunds" {
			continue
		}
		a := attrs(s.Attributes)
		if s.SpanKind != trace.SpanKindProducer || s.Parent.SpanID() != parent.SpanContext().SpanID() ||
			a["messaging.destination.name"] != "refunds" || a["messaging.operation.type"] != "send" || a["messaging.message.id"] != rc.ID {
			t.Fatalf("producer span %+v, attributes %v; want a producer span, child of the publisher's, with the message id %s", s, a, rc.ID)
		}
		sc := s.SpanContext
		producer = &sc
	}
	if producer == nil {
		t.Fatalf("no producer span among %d spans", len(r.spans.GetSpans()))
	}
	for attempt := 1; attempt <= 2; attempt++ {
		s := r.span("r-1", attempt)
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != producer.SpanID() {
			t.Errorf("attempt %d links %+v, want the producer span %v", attempt, s.Links, producer.SpanID())
		}
	}
}

// refusing is a target whose backend refuses every message, as a RabbitMQ queue that is full
// (reject-publish) would.
type refusing struct{}

func (refusing) Queue() string                               { return "full" }
func (refusing) Sender(context.Context) (core.Sender, error) { return refusing{}, nil }
func (refusing) Clock() clock.Clock                          { return clock.Real() }
func (refusing) Send(_ context.Context, msgs []core.Outgoing) []core.Receipt {
	rs := make([]core.Receipt, len(msgs))
	for i := range rs {
		rs[i].Err = errors.New("queue full is at its max-length")
	}
	return rs
}

// TestPublishSpanRecordsARefusal publishes a message the backend refuses: the producer span
// ends with the error.
func TestPublishSpanRecordsARefusal(t *testing.T) {
	r := newRig(t)
	pub, err := core.NewPublisher[Refund](r.tel.Target(refusing{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(context.Background(), Refund{ID: "r-2"}); err == nil {
		t.Fatal("a refused publish returned no error")
	}
	spans := r.spans.GetSpans()
	if len(spans) != 1 || spans[0].Name != "send full" || spans[0].Status.Code != codes.Error ||
		attrs(spans[0].Attributes)["error.type"] != "publish_failed" {
		t.Fatalf("spans of a refused publish: %+v", spans)
	}
}

// TestPublishSpanContinuesTheHeadersTrace publishes from a context without a span but with a
// trace context in the headers (a relay passing one on): the producer span continues it.
func TestPublishSpanContinuesTheHeadersTrace(t *testing.T) {
	r := newRig(t)
	r.Start()
	_, upstream := r.tp.Tracer("test").Start(context.Background(), "upstream")
	upstream.End()
	h := core.InjectHeaders(trace.ContextWithSpan(context.Background(), upstream), r.tel.Propagator(), nil)
	pub, err := core.NewPublisher[Refund](r.tel.Target(r.Broker.Queue("relayed")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(context.Background(), Refund{ID: "r-3"}, core.Headers(h)); err != nil {
		t.Fatal(err)
	}
	for _, s := range r.spans.GetSpans() {
		if s.Name == "send relayed" {
			if s.Parent.SpanID() != upstream.SpanContext().SpanID() || s.SpanContext.TraceID() != upstream.SpanContext().TraceID() {
				t.Fatalf("producer span's parent %v, want the headers' span %v", s.Parent, upstream.SpanContext())
			}
			return
		}
	}
	t.Fatal("no producer span")
}
