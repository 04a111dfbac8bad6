package settleotel

import (
	"context"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Target wraps a core.Target so that every message published to it through a core.Publisher
// (or a reply publisher) gets a producer span, "send <queue>", a child of the publishing
// context's span, and carries that span's context in its headers: the consumer's span of each
// attempt links to it (or is its child, ChildOfProducer). The span ends when the backend
// confirms the message (or refuses it: the span then records the error), and records the
// message id the backend was given or assigned.
//
//	pub, err := core.NewPublisher[Refund](tel.Target(postgres.Queue(db, "refunds_queue", "refunds")))
//
// The wrapper keeps the target's description (core.Describer) for settle asyncapi.
func (t *Telemetry) Target(target core.Target) core.Target {
	tt := tracedTarget{inner: target, t: t}
	if d, ok := target.(core.Describer); ok {
		return describedTarget{tt, d}
	}
	return tt
}

type tracedTarget struct {
	inner core.Target
	t     *Telemetry
}

func (tt tracedTarget) Queue() string { return tt.inner.Queue() }

func (tt tracedTarget) Sender(ctx context.Context) (core.Sender, error) {
	s, err := tt.inner.Sender(ctx)
	if err != nil {
		return nil, err
	}
	return &tracedSender{inner: s, t: tt.t, queue: tt.inner.Queue(), name: "send " + tt.inner.Queue()}, nil
}

// describedTarget is a tracedTarget over a target that describes itself.
type describedTarget struct {
	tracedTarget
	d core.Describer
}

func (dt describedTarget) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	return dt.d.Describe(sub)
}

type tracedSender struct {
	inner       core.Sender
	t           *Telemetry
	queue, name string
}

var producerKind = trace.WithSpanKind(trace.SpanKindProducer)

func (s *tracedSender) Clock() clock.Clock { return s.inner.Clock() }

// Send opens one producer span per message, injects it into the message's headers, sends, and
// ends each span with its receipt.
func (s *tracedSender) Send(ctx context.Context, msgs []core.Outgoing) []core.Receipt {
	spans := make([]trace.Span, len(msgs))
	parent := ctx
	traced := trace.SpanContextFromContext(ctx).IsValid()
	for i := range msgs {
		if !traced && msgs[i].Headers != nil {
			// No span in the publishing context, but a trace context in the headers (a relay
			// passing one on): the producer span continues it.
			parent = s.t.prop.Extract(ctx, propagation.MapCarrier(msgs[i].Headers))
		}
		sctx, span := s.t.tracer.Start(parent, s.name, producerKind)
		if span.IsRecording() {
			span.SetAttributes(
				semconv.MessagingDestinationName(s.queue),
				semconv.MessagingOperationTypeSend,
				semconv.MessagingOperationName("send"),
			)
			if len(msgs) > 1 {
				span.SetAttributes(semconv.MessagingBatchMessageCount(len(msgs)))
			}
		}
		if msgs[i].Headers == nil {
			msgs[i].Headers = map[string]string{}
		}
		// Replaces the trace context core injected (the publishing context's, or the headers'
		// own): the consumer is to link to this span, whose parent is that one.
		s.t.prop.Inject(sctx, propagation.MapCarrier(msgs[i].Headers))
		spans[i] = span
	}
	rs := s.inner.Send(ctx, msgs)
	for i, span := range spans {
		if i < len(rs) {
			r := rs[i]
			if span.IsRecording() && r.ID != "" {
				span.SetAttributes(semconv.MessagingMessageID(r.ID))
			}
			if r.Err != nil {
				span.SetAttributes(semconv.ErrorTypeKey.String("publish_failed"))
				span.RecordError(r.Err)
				span.SetStatus(codes.Error, r.Err.Error())
			}
		} else {
			span.SetStatus(codes.Error, "the backend returned no receipt for this message")
		}
		span.End()
	}
	return rs
}
