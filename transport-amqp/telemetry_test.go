package amqp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// tagPropagator injects a fixed traceparent.
type tagPropagator string

func (p tagPropagator) Inject(_ context.Context, h map[string]string) { h["traceparent"] = string(p) }

// A delivery carries its publisher's trace context and timestamp (copies keep both), names
// RabbitMQ, and is suspect once RabbitMQ redelivers it after a return the consumer did not make
// itself (its channel closed, as in a crash); a retry it requeued itself is not suspect.
func TestDeliveryTelemetryAndSuspects(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q := r.q("refunds")
		type seen struct {
			attempt  int
			suspect  bool
			enqueued time.Time
			system   string
			headers  map[string]string
		}
		got := make(chan seen, 4)
		var runs atomic.Int32
		subscribe(r, endpointOf(t, r.broker, false, q), func(ctx context.Context, m *core.Message[string]) error {
			d := m.Delivery()
			at, _ := d.(core.Enqueued).EnqueuedAt()
			got <- seen{m.Attempt(), d.(core.Suspect).Suspect(), at, d.(core.MessagingSystem).MessagingSystem(), m.Headers()}
			switch runs.Add(1) {
			case 1:
				return core.Retry() // no cap: requeued by the consumer, redelivered
			case 2:
				return amqp.CloseChannel(d) // returned by the closed channel, redelivered
			}
			return nil
		}, rawCodec)
		r.start()
		before := time.Now().Truncate(time.Second) // AMQP timestamps have whole seconds
		r.publish(q, "m", amqp.WithPropagator(tagPropagator("00-trace-span-01")), amqp.WithHeaders(map[string]string{"k": "v"}))
		after := time.Now()
		r.rec.WaitSettled(3)
		for _, want := range []struct {
			attempt int
			suspect bool
		}{{1, false}, {2, false}, {2, true}} { // a classic queue counts redelivered once
			g := <-got
			if g.attempt != want.attempt || g.suspect != want.suspect {
				t.Errorf("attempt %d suspect %v, want %d %v", g.attempt, g.suspect, want.attempt, want.suspect)
			}
			if g.system != "rabbitmq" || g.headers["traceparent"] != "00-trace-span-01" || g.headers["k"] != "v" {
				t.Errorf("attempt %d: system %q headers %v", g.attempt, g.system, g.headers)
			}
			if g.enqueued.Before(before) || g.enqueued.After(after) {
				t.Errorf("attempt %d: enqueued %v, published between %v and %v", g.attempt, g.enqueued, before, after)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
		defer cancel()
		if err := amqp.Publish(ctx, r.broker, "", q, "m", amqp.WithPropagator(nil)); err == nil {
			t.Error("WithPropagator(nil) accepted")
		}
	})
}

// A Backoff policy becomes RetryAfter on a queue that keeps delays on the server (DLXTTL) and
// an immediate retry on one that would keep them in the process.
func TestBackoffFollowsWhereDelaysAreHeld(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		held, inProcess := r.q("held"), r.q("in-process")
		fail := func(ctx context.Context, m *core.Message[string]) error {
			if m.Attempt() == 1 {
				return errors.New("rate limited")
			}
			return nil
		}
		policy := core.OnError(core.Backoff(time.Millisecond, 10*time.Millisecond))
		subscribe(r, endpointOf(t, r.broker, false, held, amqp.DLXTTL()), fail, rawCodec, policy)
		subscribe(r, endpointOf(t, r.broker, false, inProcess), fail, rawCodec, policy)
		r.start()
		r.publish(held, "h")
		r.publish(inProcess, "p")
		all := r.rec.WaitSettled(4)
		for _, st := range all {
			if st.Delivery.Attempt() != 1 {
				continue
			}
			want := core.ActRetryAfter
			if st.Queue == inProcess {
				want = core.ActRetry
			}
			if st.Verdict.Action != want {
				t.Errorf("%s: first failure %v, want %v", st.Queue, st.Verdict, want)
			}
		}
		if w := r.logs.Find("settle: a Backoff policy on a queue that keeps no delays durably; its failures retry at once (a delay kept in the process would be lost with it)"); len(w) != 1 {
			t.Errorf("%d warnings about Backoff without durable delays, want 1 (the in-process queue)", len(w))
		}
	})
}

// The Broker's health follows its connection: cut through a proxy of the test's own
// (RabbitMQ ports 5700-5709), /readyz fails with the dial's error; restored, the consumer
// reconnects, reports it, and /readyz passes again.
func TestHealthThroughACutConnection(t *testing.T) {
	realServer(t)
	target, _ := urlParts(t)
	p := coretest.NewProxy(t, target, 5700, 5701, 5702, 5703, 5704, 5705, 5706, 5707, 5708, 5709)
	proxied := urlVia(t, p.Port())
	r := newRig(t, server{name: "proxied", dial: amqp.URL(proxied), real: true}, true)
	events := make(chan core.Event, 8)
	r.app = core.New(core.WithLogger(r.app.Logger()), core.WithoutSignals(), core.WithObserver(r.rec.Observe),
		core.WithShutdownTimeout(2*time.Second), core.WithEventObserver(func(e core.Event) {
			if e.Kind == core.EventReconnected {
				events <- e
			}
		}))
	r.app.Register(r.broker)
	q := r.q("health")
	subscribe(r, endpointOf(t, r.broker, false, q), func(context.Context, *core.Message[string]) error { return nil }, rawCodec)
	r.start()
	r.waitOpen(q)
	h := coretest.WaitReadyz(t, r.app, 200, nil)
	if b, ok := coretest.Backend(h, "rabbitmq"); !ok || b.State != "connected" {
		t.Fatalf("backends %+v", h.Backends)
	}
	p.Cut()
	h = coretest.WaitReadyz(t, r.app, 503, func(h core.Health) bool {
		b, _ := coretest.Backend(h, "rabbitmq")
		return b.Status == core.HealthFail && b.Output != ""
	})
	if b, _ := coretest.Backend(h, "rabbitmq"); b.State != "reconnecting" || b.ErrorAt.IsZero() {
		t.Fatalf("cut: %+v", b)
	}
	p.Restore()
	select {
	case <-events:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("no reconnection reported")
	}
	coretest.WaitReadyz(t, r.app, 200, nil)
	r.publish(q, "after")
	r.rec.WaitSettled(1)
}
