package core_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// fixedPropagator injects the trace id it finds in the context under "trace".
type fixedPropagator struct{}

type traceKey struct{}

func (fixedPropagator) Inject(ctx context.Context, h map[string]string) {
	if id, ok := ctx.Value(traceKey{}).(string); ok {
		h["traceparent"] = id
		h["tracestate"] = "settle=1"
	}
}

func TestInjectHeadersAddsWithoutOverwritingOrMutating(t *testing.T) {
	ctx := context.WithValue(context.Background(), traceKey{}, "00-aa-bb-01")
	if got := core.InjectHeaders(ctx, nil, nil); got != nil {
		t.Fatalf("no propagator: %v, want nil", got)
	}
	got := core.InjectHeaders(ctx, fixedPropagator{}, nil)
	if !maps.Equal(got, map[string]string{"traceparent": "00-aa-bb-01", "tracestate": "settle=1"}) {
		t.Fatalf("into nil headers: %v", got)
	}
	orig := map[string]string{"traceparent": "00-producer-01", "k": "v"}
	got = core.InjectHeaders(ctx, fixedPropagator{}, orig)
	if !maps.Equal(got, map[string]string{"traceparent": "00-producer-01", "tracestate": "settle=1", "k": "v"}) {
		t.Fatalf("kept fields: %v", got)
	}
	if !maps.Equal(orig, map[string]string{"traceparent": "00-producer-01", "k": "v"}) {
		t.Fatalf("the caller's map was modified: %v", orig)
	}
	if got := core.InjectHeaders(context.Background(), fixedPropagator{}, orig); len(got) != 2 {
		t.Fatalf("nothing to propagate: %v", got)
	}
	// The context's propagator serves when none is given.
	got = core.InjectHeaders(core.ContextWithPropagator(ctx, fixedPropagator{}), nil, nil)
	if got["traceparent"] != "00-aa-bb-01" {
		t.Fatalf("context's propagator: %v", got)
	}
}

func TestHandlersSeeTheirSubscriptionAndTheAppsPropagator(t *testing.T) {
	h := coretest.New(t, core.WithPropagator(fixedPropagator{}))
	type seen struct {
		sub      core.Subscription
		ok       bool
		prop     bool
		enqueued time.Time
		system   string
	}
	got := make(chan seen, 1)
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		s, ok := core.SubscriptionFrom(ctx)
		e, _ := m.Delivery().(core.Enqueued).EnqueuedAt()
		got <- seen{sub: s, ok: ok, prop: core.PropagatorFrom(ctx) != nil, enqueued: e, system: m.Delivery().(core.MessagingSystem).MessagingSystem()}
		return nil
	}, core.Name("refunds-sub"), core.Timeout(time.Minute))
	h.Start()
	h.Publish("refunds", Refund{ID: "r-1"})
	s := <-got
	if !s.ok || s.sub.Name != "refunds-sub" || s.sub.Queue != "refunds" || s.sub.Options.Timeout != time.Minute {
		t.Fatalf("SubscriptionFrom = %+v, %v", s.sub, s.ok)
	}
	if !s.prop {
		t.Fatal("the handler's context carries no propagator")
	}
	if !s.enqueued.Equal(coretest.Epoch) || s.system != "memory" {
		t.Fatalf("enqueued %v, system %q", s.enqueued, s.system)
	}
	if _, ok := core.SubscriptionFrom(context.Background()); ok {
		t.Fatal("SubscriptionFrom found a subscription in a bare context")
	}
}

func TestAppMiddlewareWrapsEverySubscriptionOutsideItsOwn(t *testing.T) {
	var order []string
	mark := func(name string) core.Middleware {
		return func(next core.HandlerFunc) core.HandlerFunc {
			return func(ctx context.Context, d core.Delivery) error {
				order = append(order, name)
				return next(ctx, d)
			}
		}
	}
	settled := make(chan core.Settlement, 1)
	h := coretest.New(t, core.WithMiddleware(mark("app-1"), mark("app-2")), core.WithObserver(func(s core.Settlement) { settled <- s }))
	coretest.Subscribe(h, "refunds", func(ctx context.Context, m *core.Message[Refund]) error {
		order = append(order, "handler")
		return nil
	}, core.Use(mark("sub")))
	h.Start()
	h.Advance(time.Hour)
	h.Publish("refunds", Refund{ID: "r-1"})
	s := <-settled
	if got := strings.Join(order, ","); got != "app-1,app-2,sub,handler" {
		t.Fatalf("order %s", got)
	}
	if !s.At.Equal(coretest.Epoch.Add(time.Hour)) {
		t.Fatalf("Settlement.At = %v, want the App's clock", s.At)
	}
	if err := core.Subscribe(core.New(core.WithMiddleware(nil)), h.Broker.Queue("x"), func(context.Context, *core.Message[Refund]) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "middleware 0 is nil") {
		t.Fatalf("nil App middleware: %v", err)
	}
}
