package settleotel

import (
	"context"
	"errors"

	"github.com/settlehq/settle/core"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The names of settle's metrics. Durations are in seconds.
const (
	// MetricSettled counts settlements by outcome and result.
	MetricSettled = "settle.messages.settled"
	// MetricProcessDuration is the handler's duration (the messaging conventions' own name).
	MetricProcessDuration = "messaging.process.duration"
	// MetricLatency is the time from a message's publication to its durable settlement.
	MetricLatency = "settle.message.latency"
	// MetricAttempts is the attempt number at which messages were settled.
	MetricAttempts = "settle.message.attempts"
	// MetricDeadLetters counts messages moved to a dead letter.
	MetricDeadLetters = "settle.dead_letters"
	// MetricCopiesRefused counts copies (retries, delayed copies, dead letters) the broker
	// refused or could not route.
	MetricCopiesRefused = "settle.copies.refused"
	// MetricReconnects counts connections or consumers lost and made again.
	MetricReconnects = "settle.reconnects"
	// MetricOverruns counts handlers still running past their timeout and its grace.
	MetricOverruns = "settle.handler.overruns"
	// MetricSettlementFailures counts settlements that could not be made durable.
	MetricSettlementFailures = "settle.settlements.failed"
	// MetricSettlementsUnknown counts settlements that were sent and whose confirmation was lost
	// (core.ErrSettlementUnknown): the server may have applied them.
	MetricSettlementsUnknown = "settle.settlements.unknown"
	// MetricSourceFailures counts failures to take the next delivery.
	MetricSourceFailures = "settle.source.failures"
	// MetricDiscarded counts messages the server discarded by its own rule after settle
	// returned them (a quorum queue at its delivery limit with no dead-letter route).
	MetricDiscarded = "settle.messages.discarded"
	// MetricQueueMessages is a queue's depth by state (AttrState), from its ops Stats.
	MetricQueueMessages = "settle.queue.messages"
	// MetricQueueOldestReady is the age of a queue's oldest ready message, from its ops Stats.
	MetricQueueOldestReady = "settle.queue.oldest_ready.age"
)

// AttrState is the state of MetricQueueMessages: ready, delayed, in_flight, dead.
const AttrState = attribute.Key("settle.state")

var (
	secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400}
	attemptBuckets = []float64{1, 2, 3, 4, 5, 7, 10, 15, 20, 50, 100}
)

type instruments struct {
	settled, deadLetters                                           metric.Int64Counter
	refused, reconnects, overruns, setFailed, srcFailed, discarded metric.Int64Counter
	setUnknown                                                     metric.Int64Counter
	duration, latency                                              metric.Float64Histogram
	attempts                                                       metric.Int64Histogram
}

func (m *instruments) init(mt metric.Meter) error {
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := mt.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	m.settled = counter(MetricSettled, "Messages settled, by outcome (settle.outcome) and result (settle.result).", "{message}")
	m.deadLetters = counter(MetricDeadLetters, "Messages moved to a dead letter.", "{message}")
	m.refused = counter(MetricCopiesRefused, "Copies (retries, delayed copies, dead letters) the broker refused or could not route; each original stayed unacknowledged.", "{message}")
	m.reconnects = counter(MetricReconnects, "Connections or consumers lost and made again.", "{reconnect}")
	m.overruns = counter(MetricOverruns, "Handlers still running after their timeout and its grace.", "{handler}")
	m.setFailed = counter(MetricSettlementFailures, "Settlements that could not be made durable; the message returns.", "{message}")
	m.setUnknown = counter(MetricSettlementsUnknown, "Settlements sent whose confirmation was lost: the server may have applied them (the message is gone) or not (it returns).", "{message}")
	m.srcFailed = counter(MetricSourceFailures, "Failures to take the next delivery.", "{failure}")
	m.discarded = counter(MetricDiscarded, "Messages the server discarded by its own rule after settle returned them (a quorum queue at its delivery limit with no dead-letter route).", "{message}")
	var err error
	m.duration, err = mt.Float64Histogram(MetricProcessDuration, metric.WithDescription("Duration of the handler."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...))
	errs = append(errs, err)
	m.latency, err = mt.Float64Histogram(MetricLatency, metric.WithDescription("Time from a message's publication to its durable settlement."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...))
	errs = append(errs, err)
	m.attempts, err = mt.Int64Histogram(MetricAttempts, metric.WithDescription("The attempt at which a message was settled."),
		metric.WithUnit("{attempt}"), metric.WithExplicitBucketBoundaries(attemptBuckets...))
	errs = append(errs, err)
	return errors.Join(errs...)
}

// attrKey identifies one attribute set of the settlement metrics; sets are built once each.
type attrKey struct {
	system, queue, sub string
	action             core.Action
	failed, unknown    bool
	errType, dest      string
}

type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func (t *Telemetry) attrSet(k attrKey) *attrSet {
	t.attrMu.RLock()
	s := t.attrs[k]
	t.attrMu.RUnlock()
	if s != nil {
		return s
	}
	kv := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(k.system),
		semconv.MessagingDestinationName(k.queue),
		semconv.MessagingDestinationSubscriptionName(k.sub),
		semconv.MessagingOperationName("process"),
		AttrOutcome.String(k.action.String()),
	}
	switch {
	case k.unknown:
		kv = append(kv, AttrResult.String(ResultUnknown))
	case k.failed:
		kv = append(kv, AttrResult.String(ResultFailed))
	default:
		kv = append(kv, AttrResult.String(ResultSettled))
	}
	if k.errType != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(k.errType))
	}
	if k.dest != "" {
		kv = append(kv, AttrDeadLetter.String(k.dest))
	}
	set := attribute.NewSet(kv...)
	s = &attrSet{add: []metric.AddOption{metric.WithAttributeSet(set)}, rec: []metric.RecordOption{metric.WithAttributeSet(set)}}
	t.attrMu.Lock()
	if old := t.attrs[k]; old != nil {
		s = old
	} else {
		t.attrs[k] = s
	}
	t.attrMu.Unlock()
	return s
}

// record records one settlement's metrics.
func (t *Telemetry) record(s core.Settlement, h *handled, errType string) {
	d, v := s.Delivery, s.Verdict
	k := attrKey{system: systemOf(d), queue: s.Queue, sub: s.Subscription, action: v.Action, failed: s.Err != nil,
		unknown: errors.Is(s.Err, core.ErrSettlementUnknown), errType: errType}
	if v.Action == core.ActDeadLetter {
		k.dest = v.Dest
	}
	a := t.attrSet(k)
	ctx := context.Background()
	t.m.settled.Add(ctx, 1, a.add...)
	if h.ran {
		t.m.duration.Record(ctx, h.end.Sub(h.start).Seconds(), a.rec...)
	}
	if s.Err != nil || v.Action == core.ActAbandon {
		return
	}
	t.m.attempts.Record(ctx, int64(d.Attempt()), a.rec...)
	if e, ok := d.(core.Enqueued); ok {
		if at, ok := e.EnqueuedAt(); ok {
			t.m.latency.Record(ctx, max(s.At.Sub(at).Seconds(), 0), a.rec...)
		}
	}
	if v.Action == core.ActDeadLetter {
		t.m.deadLetters.Add(ctx, 1, a.add...)
	}
}

// event counts the App's events.
func (t *Telemetry) event(e core.Event) {
	var c metric.Int64Counter
	switch e.Kind {
	case core.EventCopyRefused:
		c = t.m.refused
	case core.EventReconnected:
		c = t.m.reconnects
	case core.EventHandlerOverran:
		c = t.m.overruns
	case core.EventSettlementFailed:
		c = t.m.setFailed
	case core.EventSettlementUnknown:
		c = t.m.setUnknown
	case core.EventSourceFailed:
		c = t.m.srcFailed
	case core.EventDiscarded:
		c = t.m.discarded
	default:
		return
	}
	c.Add(context.Background(), 1, metric.WithAttributes(
		semconv.MessagingDestinationName(e.Queue),
		semconv.MessagingDestinationSubscriptionName(e.Subscription),
	))
}
