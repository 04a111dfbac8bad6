package natsjs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// tagPropagator injects a fixed traceparent.
type tagPropagator string

func (p tagPropagator) Inject(_ context.Context, h map[string]string) { h["traceparent"] = string(p) }

type seen struct {
	attempt  int
	suspect  bool
	enqueued time.Time
	system   string
	headers  map[string]string
}

func observe(m core.Delivery) seen {
	at, _ := m.(core.Enqueued).EnqueuedAt()
	return seen{attempt: m.Attempt(), suspect: m.(core.Suspect).Suspect(), enqueued: at,
		system: m.(core.MessagingSystem).MessagingSystem(), headers: m.Headers()}
}

// A delivery says when JetStream stored it and that it is NATS; Publish writes the trace
// context; a message this subscription returned itself (-NAK of a retry) is not suspect when it
// comes back, one another client returned (or a crash left) is.
func TestDeliveryTelemetryAndSuspects(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
		got := make(chan seen, 4)
		q := r.queue("refunds")
		if err := core.Subscribe(r.app, q, func(ctx context.Context, m *core.Message[string]) error {
			got <- observe(m.Delivery())
			if m.Attempt() == 1 {
				return core.Retry()
			}
			return nil
		}, core.WithCodec(core.Raw)); err != nil {
			t.Fatal(err)
		}
		r.mustStart()
		before := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
		defer cancel()
		if _, err := natsjs.Publish(ctx, r.conn, r.subject("refunds"), "m1", natsjs.WithPayloadCodec(core.Raw),
			natsjs.WithPropagator(tagPropagator("00-trace-span-01"))); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		r.rec.WaitSettled(2)
		for _, want := range []int{1, 2} {
			s := <-got
			if s.attempt != want || s.suspect {
				t.Errorf("delivery %d: attempt %d suspect %v; settle's own -NAK makes no suspect", want, s.attempt, s.suspect)
			}
			if s.system != "nats" || s.headers["traceparent"] != "00-trace-span-01" {
				t.Errorf("delivery %d: system %q headers %v", want, s.system, s.headers)
			}
			// Stored by the server on its own clock, between the test's before and after (a
			// second either side for clocks of different machines, none here).
			if s.enqueued.Before(before.Add(-time.Second)) || s.enqueued.After(after.Add(time.Second)) {
				t.Errorf("delivery %d: enqueued %v, published between %v and %v", want, s.enqueued, before, after)
			}
		}
		if _, err := natsjs.Publish(ctx, r.conn, r.subject("refunds"), "m", natsjs.WithPropagator(nil)); err == nil {
			t.Error("WithPropagator(nil) accepted")
		}
		r.stop()

		// Another client takes the next message and returns it: the subscription did not, so
		// the redelivery is suspect.
		r.publish("refunds", "m2", nil)
		cons, err := r.admin.js.Consumer(ctx, q.Stream(), q.Durable())
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(coretest.WaitTimeout))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.Nak(); err != nil {
				t.Fatal(err)
			}
		}
		app := core.New(core.WithLogger(logTo(r.logs)), core.WithoutSignals(), core.WithShutdownTimeout(5*time.Second))
		c, err := natsjs.New(url, natsjs.WithLogger(logTo(r.logs)))
		if err != nil {
			t.Fatal(err)
		}
		app.Register(c)
		q2, err := natsjs.NewQueue(c, r.subject("refunds"))
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, q2, func(ctx context.Context, m *core.Message[string]) error {
			got <- observe(m.Delivery())
			return nil
		}, core.WithCodec(core.Raw)); err != nil {
			t.Fatal(err)
		}
		actx, stop := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- app.Run(actx) }()
		defer func() { stop(); <-ran }()
		select {
		case s := <-got:
			if s.attempt != 2 || !s.suspect {
				t.Errorf("redelivery another client returned: attempt %d suspect %v, want 2 and suspect", s.attempt, s.suspect)
			}
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("m2 never came")
		}
	})
}

// The Conn's health follows its connection, and every subscription reports the reconnection:
// cut through a proxy of the test's own (NATS ports 4260-4269), /readyz fails, restored, it
// passes again.
func TestHealthAndReconnectThroughACutConnection(t *testing.T) {
	url := realServer(t)
	p := coretest.NewProxy(t, url[len("nats://"):], 4260, 4261, 4262, 4263, 4264, 4265, 4266, 4267, 4268, 4269)
	disconnected := make(chan struct{}, 8)
	r := newRig(t, "nats://"+p.Addr(), clock.Real(), natsjs.DeclareTopology(true),
		natsjs.NATSOptions(nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} })))
	events := make(chan core.Event, 8)
	r.app = core.New(core.WithLogger(logTo(r.logs)), core.WithoutSignals(), core.WithObserver(r.rec.Observe),
		core.WithShutdownTimeout(5*time.Second), core.WithEventObserver(func(e core.Event) { events <- e }))
	r.app.Register(r.conn)
	if err := core.Subscribe(r.app, r.queue("refunds"), func(context.Context, *core.Message[string]) error { return nil },
		core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	h := coretest.WaitReadyz(t, r.app, 200, nil)
	if b, ok := coretest.Backend(h, "nats"); !ok || b.State != "connected" || b.Status != core.HealthPass {
		t.Fatalf("backend health %+v", h.Backends)
	}
	p.Cut()
	<-disconnected
	h = coretest.WaitReadyz(t, r.app, 503, nil)
	if b, _ := coretest.Backend(h, "nats"); b.State != "reconnecting" || b.Status != core.HealthFail {
		t.Fatalf("cut: backend health %+v", h.Backends)
	}
	p.Restore()
	select {
	case e := <-events:
		if e.Kind != core.EventReconnected || e.Queue != r.subject("refunds") {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("no reconnection reported")
	}
	coretest.WaitReadyz(t, r.app, 200, nil)
	r.publish("refunds", "after", nil)
	r.rec.WaitSettled(1)
}

// An ack is reported settled only once the server confirmed it (a double ack, the default): the
// handler cuts the connection (a proxy of the test's own, ports 4290-4299) before its outcome is
// written, and the settlement is not reported done — a success the server never saw — but as
// unconfirmed (a failure, or unknown: the client cannot tell whether the frame reached the
// server). With UnconfirmedAcks it would report success, the ack still in the client's buffer.
func TestAckReportedOnlyWhenConfirmed(t *testing.T) {
	settleCutBeforeConfirmation(t, nil, core.ActAck, 4290)
}

// A drop (+TERM) is reported settled only once the server confirmed it, like an ack: the handler
// cuts the connection (a proxy of the test's own, ports 4280-4289) before its outcome is written,
// and the drop is not reported done. Written without a confirmation, a +TERM that reaches a
// server shutting down is dropped there without a word (the chaos suite's restart trial saw it),
// and the message is delivered and dropped again, both reported done.
func TestDropReportedOnlyWhenConfirmed(t *testing.T) {
	settleCutBeforeConfirmation(t, core.Drop(), core.ActDrop, 4280)
}

// settleCutBeforeConfirmation runs a handler that returns outcome after cutting the
// connection (a proxy of the test's own on ports port to port+9) and checks that the first
// settlement, of action want, is not reported done (failed or unknown).
func settleCutBeforeConfirmation(t *testing.T, outcome error, want core.Action, port int) {
	t.Helper()
	url := realServer(t)
	ports := make([]int, 10)
	for i := range ports {
		ports[i] = port + i
	}
	p := coretest.NewProxy(t, url[len("nats://"):], ports...)
	r := newRig(t, "nats://"+p.Addr(), clock.Real(), natsjs.DeclareTopology(true), natsjs.RequestTimeout(500*time.Millisecond))
	var runs atomic.Int32
	published := make(chan struct{})
	if err := core.Subscribe(r.app, r.queue("refunds", natsjs.AckWait(time.Second)), func(context.Context, *core.Message[string]) error {
		if runs.Add(1) == 1 {
			<-published // the publisher has its acknowledgement: the cut is the handler's alone
			p.Cut()
		}
		return outcome
	}, core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	r.publish("refunds", "m", nil)
	close(published)
	got := r.rec.WaitFor(func(s []core.Settlement) bool { return len(s) >= 1 })
	p.Restore()
	if got[0].Verdict.Action != want || got[0].Err == nil {
		t.Fatalf("first settlement %v (err %v): want %v not reported done, the connection cut before the server confirmed it", got[0].Verdict.Action, got[0].Err, want)
	}
	t.Logf("the unconfirmed %v reports: %v", want, got[0].Err)
}
