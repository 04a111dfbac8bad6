package settleotel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Attributes settle adds to the messaging conventions' own.
const (
	// AttrAttempt is the delivery's attempt number, 1 on the first.
	AttrAttempt = attribute.Key("settle.attempt")
	// AttrHandler is what the handler returned: ack, drop, retry, retry_after (outcomes), or
	// error, panic, decode_error, timeout (failures that took the error policy), or not_called
	// (a delivery past its cap that never settled goes to the dead letter without its handler).
	AttrHandler = attribute.Key("settle.handler")
	// AttrOutcome is what settle performed: ack, drop, retry, retry_after, dead_letter, abandon.
	AttrOutcome = attribute.Key("settle.outcome")
	// AttrResult is whether the settlement was made durable ("settled"), failed ("failed": the
	// message returns as an abandoned one would), or was sent and not confirmed ("unknown",
	// core.ErrSettlementUnknown: the message returns only if the server did not apply it).
	AttrResult = attribute.Key("settle.result")
	// AttrRetryDelay is a retry_after's delay in seconds.
	AttrRetryDelay = attribute.Key("settle.retry.delay")
	// AttrDeadLetter is a dead letter's destination.
	AttrDeadLetter = attribute.Key("settle.dead_letter.destination")
)

// The values of AttrResult.
const (
	ResultSettled = "settled"
	ResultFailed  = "failed"
	ResultUnknown = "unknown"
)

// handled is a delivery the middleware has seen, waiting for its settlement.
type handled struct {
	span       trace.Span
	start, end time.Time
	stamp      bool // times are the App's clock's (not the wall clock): give them to the span
	err        error
	ran        bool // the handler ran (false: settled without it)
	panicked   bool // the handler panicked: the settlement's cause is core's PanicError
}

var handledPool = sync.Pool{New: func() any { return new(handled) }}

// subInfo is what the middleware of one subscription keeps about it.
type subInfo struct {
	name, queue, spanName string
	clk                   clock.Clock
	stamp                 bool
}

func newSubInfo(name, queue string, clk clock.Clock) *subInfo {
	if clk == nil {
		clk = clock.Real()
	}
	return &subInfo{name: name, queue: queue, spanName: "process " + queue, clk: clk, stamp: clk != clock.Real()}
}

// middleware opens the delivery's span around its handler and keeps it for the settlement.
// Core builds one per subscription.
func (t *Telemetry) middleware(next core.HandlerFunc) core.HandlerFunc {
	var info atomic.Pointer[subInfo]
	return func(ctx context.Context, d core.Delivery) error {
		si := info.Load()
		if si == nil {
			sub, _ := core.SubscriptionFrom(ctx)
			si = newSubInfo(sub.Name, sub.Queue, sub.Clock)
			info.Store(si)
		}
		start := si.clk.Now()
		ctx, span := t.start(ctx, si, d, start)
		h := handledPool.Get().(*handled)
		*h = handled{span: span, start: start, stamp: si.stamp, ran: true, panicked: true}
		defer func() {
			// Also when the handler panics (core recovers it and settles the delivery by
			// OnPanic): the panic goes on untouched, and the settlement's cause names it.
			h.end = si.clk.Now()
			if !t.keep(d, h) {
				// A delivery type that cannot be a map key: the span ends with its handler.
				handlerAttrs(span, h.err)
				endSpan(span, h.stamp, h.end)
			}
		}()
		err := next(ctx, d)
		h.err, h.panicked = err, false
		return err
	}
}

func (t *Telemetry) keep(d core.Delivery, h *handled) bool {
	if !reflect.TypeOf(d).Comparable() {
		return false
	}
	t.mu.Lock()
	t.live[d] = h
	t.mu.Unlock()
	return true
}

func (t *Telemetry) take(d core.Delivery) *handled {
	if !reflect.TypeOf(d).Comparable() {
		return nil
	}
	t.mu.Lock()
	h := t.live[d]
	delete(t.live, d)
	t.mu.Unlock()
	return h
}

var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	rootOpts     = []trace.SpanStartOption{consumerKind, trace.WithNewRoot()}
	childOpts    = []trace.SpanStartOption{consumerKind}
)

// start opens a delivery's span at start: a new root linked to the producer's span, or the
// producer's child (ChildOfProducer). Attributes are set once the span is known to record, so
// that an unsampled or no-op span costs no attribute slices (samplers see none).
func (t *Telemetry) start(ctx context.Context, si *subInfo, d core.Delivery, start time.Time) (context.Context, trace.Span) {
	ctx = t.prop.Extract(ctx, propagation.MapCarrier(d.Headers()))
	opts := childOpts
	if !t.child {
		opts = rootOpts
		if producer := trace.SpanContextFromContext(ctx); producer.IsValid() {
			opts = append(opts[:len(opts):len(opts)], trace.WithLinks(trace.Link{SpanContext: producer}))
		}
	}
	if si.stamp {
		opts = append(opts[:len(opts):len(opts)], trace.WithTimestamp(start))
	}
	ctx, span := t.tracer.Start(ctx, si.spanName, opts...)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystemKey.String(systemOf(d)),
			semconv.MessagingDestinationName(si.queue),
			semconv.MessagingDestinationSubscriptionName(si.name),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingMessageID(d.ID()),
			AttrAttempt.Int(d.Attempt()),
		)
	}
	return ctx, span
}

func endSpan(span trace.Span, stamp bool, at time.Time) {
	if stamp && span.IsRecording() {
		span.End(trace.WithTimestamp(at))
		return
	}
	span.End()
}

func systemOf(d core.Delivery) string {
	if s, ok := d.(core.MessagingSystem); ok {
		return s.MessagingSystem()
	}
	return "unknown"
}

// handlerResult names what the handler returned (AttrHandler) and, for a failure, its
// error.type.
func handlerResult(err error) (result, errType string) {
	if err == nil {
		return "ack", ""
	}
	if o, ok := core.AsOutcome(err); ok {
		return o.Kind().String(), ""
	}
	var de *core.DecodeError
	var pe *core.PanicError
	switch {
	case errors.As(err, &de):
		return "decode_error", "decode_error"
	case errors.As(err, &pe):
		return "panic", "panic"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", "timeout"
	}
	return "error", fmt.Sprintf("%T", err)
}

func handlerAttrs(span trace.Span, err error) (failed bool, errType string) {
	res, et := handlerResult(err)
	if span.IsRecording() {
		span.SetAttributes(AttrHandler.String(res))
		if et != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return et != "", et
}

// settled ends the delivery's span when its settlement is durable (or failed) and records the
// settlement's metrics.
func (t *Telemetry) settled(s core.Settlement) {
	h := t.take(s.Delivery)
	if h == nil {
		// The handler never ran (a delivery past its cap without a settlement): its span is
		// the settlement alone.
		si := newSubInfo(s.Subscription, s.Queue, nil)
		si.stamp = true
		_, span := t.start(context.Background(), si, s.Delivery, s.At)
		h = handledPool.Get().(*handled)
		*h = handled{span: span, start: s.At, end: s.At, stamp: true}
		if span.IsRecording() {
			span.SetAttributes(AttrHandler.String("not_called"))
		}
	}
	span := h.span
	v := s.Verdict
	if h.panicked {
		h.err = v.Cause
	}
	var errType string
	if h.ran {
		_, errType = handlerAttrs(span, h.err)
	}
	if v.Action == core.ActDeadLetter && errType == "" {
		errType = "dead_letter"
	}
	if s.Err != nil {
		errType = "settlement_failed"
		if errors.Is(s.Err, core.ErrSettlementUnknown) {
			errType = "settlement_unknown"
		}
	}
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(v.Action.String()))
		switch v.Action {
		case core.ActRetryAfter:
			span.SetAttributes(AttrRetryDelay.Float64(v.Delay.Seconds()))
		case core.ActDeadLetter:
			span.SetAttributes(AttrDeadLetter.String(v.Dest))
			if errType == "dead_letter" {
				span.SetAttributes(semconv.ErrorTypeKey.String(errType))
				span.SetStatus(codes.Error, core.Reason(v))
			}
		}
		result := ResultSettled
		if s.Err != nil {
			what := "settlement failed: "
			result = ResultFailed
			if errType == "settlement_unknown" {
				result, what = ResultUnknown, "settlement unknown: "
			}
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			span.RecordError(s.Err)
			span.SetStatus(codes.Error, what+s.Err.Error())
		}
		span.SetAttributes(AttrResult.String(result))
	}
	endSpan(span, h.stamp, s.At)
	t.record(s, h, errType)
	*h = handled{}
	handledPool.Put(h)
}
