package settleotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/ops"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// QueueStatsTimeout bounds the Stats call of each observed queue at one collection.
const QueueStatsTimeout = 5 * time.Second

// ObserveQueues reports the depth of queues as observable gauges, read from their ops Stats at
// each collection: MetricQueueMessages by state (ready, delayed, in_flight, dead) and
// MetricQueueOldestReady, each with messaging.destination.name. A figure the backend cannot
// take (ops.Stats.Unmeasured) is left out rather than reported as zero; a queue whose Stats
// fails is left out of that collection. Unregister the returned registration to stop.
func (t *Telemetry) ObserveQueues(queues ...ops.Queue) (metric.Registration, error) {
	for i, q := range queues {
		if q == nil {
			return nil, fmt.Errorf("settleotel.ObserveQueues: queue %d is nil", i)
		}
	}
	depth, err := t.meter.Int64ObservableGauge(MetricQueueMessages,
		metric.WithDescription("Messages in the queue by state (settle.state: ready, delayed, in_flight, dead)."), metric.WithUnit("{message}"))
	if err != nil {
		return nil, err
	}
	age, err := t.meter.Float64ObservableGauge(MetricQueueOldestReady,
		metric.WithDescription("Age of the queue's oldest ready message."), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	return t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		for _, q := range queues {
			sctx, cancel := context.WithTimeout(ctx, QueueStatsTimeout)
			st, err := q.Stats(sctx)
			cancel()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			observeStats(o, depth, age, st)
		}
		return errors.Join(errs...)
	}, depth, age)
}

func observeStats(o metric.Observer, depth metric.Int64ObservableGauge, age metric.Float64ObservableGauge, st ops.Stats) {
	dest := semconv.MessagingDestinationName(st.Queue)
	for _, f := range []struct {
		fig ops.Figure
		n   int64
	}{{ops.FigureReady, st.Ready}, {ops.FigureDelayed, st.Delayed}, {ops.FigureInFlight, st.InFlight}, {ops.FigureDead, st.Dead}} {
		if !st.Measured(f.fig) || (f.fig == ops.FigureDead && st.DeadLetter == "") {
			continue
		}
		o.ObserveInt64(depth, f.n, metric.WithAttributes(dest, AttrState.String(string(f.fig))))
	}
	if st.Measured(ops.FigureOldestReady) {
		o.ObserveFloat64(age, st.OldestReady.Seconds(), metric.WithAttributes(dest))
	}
}
