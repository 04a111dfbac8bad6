package core

import (
	"context"
	"maps"
	"time"
)

// This file holds what telemetry needs from core and the backends, without core depending on a
// telemetry library: the trace context a publisher carries in a message's headers, what a
// delivery can say about where and when it was published, and which subscription a context
// belongs to. The OpenTelemetry module (settleotel) builds on it.

// Propagator carries a cross-process context (a W3C trace context) in the headers of the
// messages a service publishes. settleotel.Propagator adapts OpenTelemetry's propagators to it.
type Propagator interface {
	// Inject adds ctx's fields (traceparent, tracestate, …) to headers.
	Inject(ctx context.Context, headers map[string]string)
}

type propagatorKey struct{}

// WithPropagator makes every context the App hands out (handlers, settlements, backends'
// Start) carry p, so that whatever publishes from them (a SQL publisher, an AMQP or NATS
// publish, the outbox) injects the handler's trace context into the messages it sends.
// Publishers outside the App take it from a publisher option or ContextWithPropagator.
func WithPropagator(p Propagator) AppOption { return func(a *App) { a.propagator = p } }

// ContextWithPropagator returns a copy of ctx that carries p for InjectHeaders.
func ContextWithPropagator(ctx context.Context, p Propagator) context.Context {
	return context.WithValue(ctx, propagatorKey{}, p)
}

// PropagatorFrom returns the Propagator ctx carries, nil when none.
func PropagatorFrom(ctx context.Context) Propagator {
	p, _ := ctx.Value(propagatorKey{}).(Propagator)
	return p
}

// InjectHeaders is what publishers call on the headers of each message they send: it returns h
// with ctx's propagated fields added by p, or by the Propagator ctx carries when p is nil. A
// field h already has is kept (a relayed or copied message keeps its producer's trace context).
// h itself is never modified: when a field is added the result is a new map. Without a
// propagator, or with nothing to propagate, it returns h unchanged.
func InjectHeaders(ctx context.Context, p Propagator, h map[string]string) map[string]string {
	if p == nil {
		if p = PropagatorFrom(ctx); p == nil {
			return h
		}
	}
	add := make(map[string]string, 2)
	p.Inject(ctx, add)
	var out map[string]string
	for k, v := range add {
		if _, ok := h[k]; ok {
			continue
		}
		if out == nil {
			out = maps.Clone(h)
			if out == nil {
				out = make(map[string]string, len(add))
			}
		}
		out[k] = v
	}
	if out == nil {
		return h
	}
	return out
}

// Enqueued is implemented by a delivery that knows when its message was first published: a SQL
// row's created_at, an AMQP message's timestamp property, the time JetStream stored it. Retries
// keep it (a copy carries the original's time), so it measures publish-to-settle latency.
type Enqueued interface {
	// EnqueuedAt returns the time, and false when this message does not carry one (an AMQP
	// message published without a timestamp, a table without created_at).
	EnqueuedAt() (time.Time, bool)
}

// MessagingSystem is implemented by a delivery that names the system it came from, as
// OpenTelemetry's messaging.system spells it: "postgresql", "mysql", "sqlite", "rabbitmq",
// "nats".
type MessagingSystem interface {
	MessagingSystem() string
}

type subscriptionKey struct{}

// SubscriptionFrom returns the subscription whose handler, middleware or settlement runs with
// ctx (its name, queue and options), and false for a context that is not a handler's. Middleware
// shared by many subscriptions tells them apart with it.
func SubscriptionFrom(ctx context.Context) (Subscription, bool) {
	s, ok := ctx.Value(subscriptionKey{}).(*Subscription)
	if !ok {
		return Subscription{}, false
	}
	return *s, true
}
