package settleotel

import (
	"context"
	"errors"
	"sync"

	"github.com/settlehq/settle/core"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of settle's spans and metrics.
const ScopeName = "github.com/settlehq/settle/otel"

// Telemetry instruments settle Apps: one span per delivery, settle's metrics, and the trace
// context carried in published messages' headers. Give its AppOptions to core.New. It is safe
// for concurrent use, and one Telemetry may serve several Apps.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
	prop   propagation.TextMapPropagator
	child  bool
	m      instruments

	mu   sync.Mutex
	live map[core.Delivery]*handled // handled by the middleware, not yet settled

	attrMu sync.RWMutex
	attrs  map[attrKey]*attrSet
}

// Option configures a Telemetry.
type Option func(*config) error

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	prop  propagation.TextMapPropagator
	child bool
}

// WithTracerProvider sets where spans go (default: the global provider, otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("settleotel.WithTracerProvider(nil): no provider")
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets where metrics go (default: the global provider, otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("settleotel.WithMeterProvider(nil): no provider")
		}
		c.mp = mp
		return nil
	}
}

// WithPropagators sets how the trace context is written into and read from message headers
// (default: W3C trace context and baggage).
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("settleotel.WithPropagators(nil): no propagator")
		}
		c.prop = p
		return nil
	}
}

// ChildOfProducer makes each delivery's span a child of the span that published the message,
// so that producer and consumer share one trace. By default the delivery's span starts a trace
// of its own and links to the producer's span, as OpenTelemetry's messaging conventions
// recommend: a message retried ten times, or published by a long batch, then does not stretch
// the producer's trace.
func ChildOfProducer() Option {
	return func(c *config) error {
		c.child = true
		return nil
	}
}

// New returns a Telemetry. It creates its instruments on the meter provider at once.
func New(opts ...Option) (*Telemetry, error) {
	c := config{}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("settleotel.New: nil option")
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	t := &Telemetry{
		tracer: c.tp.Tracer(ScopeName),
		meter:  c.mp.Meter(ScopeName),
		prop:   c.prop,
		child:  c.child,
		live:   make(map[core.Delivery]*handled),
		attrs:  make(map[attrKey]*attrSet),
	}
	if err := t.m.init(t.meter); err != nil {
		return nil, err
	}
	return t, nil
}

// AppOptions installs the Telemetry in an App: the tracing middleware on every subscription,
// the settlement and event observers that end spans and record metrics, and the propagator
// that publishers use from the App's contexts (handlers publishing downstream, the outbox).
func (t *Telemetry) AppOptions() []core.AppOption {
	return []core.AppOption{
		core.WithMiddleware(t.middleware),
		core.WithObserver(t.settled),
		core.WithEventObserver(t.event),
		core.WithPropagator(t.Propagator()),
	}
}

// Propagator returns the core.Propagator that publishers use to write the trace context into
// message headers; give it to a publisher used outside an App (sqlqueue.PublishPropagator,
// amqp.WithPropagator, natsjs.WithPropagator) or wrap a context with
// core.ContextWithPropagator.
func (t *Telemetry) Propagator() core.Propagator { return propagator{t.prop} }

type propagator struct{ p propagation.TextMapPropagator }

func (p propagator) Inject(ctx context.Context, h map[string]string) {
	p.p.Inject(ctx, propagation.MapCarrier(h))
}
