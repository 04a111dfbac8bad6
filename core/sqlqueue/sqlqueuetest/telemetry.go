package sqlqueuetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// tagPropagator injects a fixed traceparent, telling apart who injected it.
type tagPropagator string

func (p tagPropagator) Inject(_ context.Context, h map[string]string) { h["traceparent"] = string(p) }

// telemetry: a delivery reports when its row was published (created_at, kept by a retry) and
// its messaging system; a publisher writes its propagator's trace context into the headers, and
// one without a propagator of its own takes the one its context carries (as a handler's carries
// its App's).
func telemetry(t *testing.T, f *Fixture, which sqlqueue.Form) {
	e := newEnv(t, f)
	tb, _ := e.deletingQueue()
	p, err := sqlqueue.NewPublisher(f.Dialect, f.DB, tb, "q", sqlqueue.PublishClock(e.clock), sqlqueue.PublishPropagator(tagPropagator("publisher")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlqueue.NewPublisher(f.Dialect, f.DB, tb, "q", sqlqueue.PublishPropagator(nil)); err == nil {
		t.Error("PublishPropagator(nil) accepted")
	}
	published := e.clock.Now()
	e.publish(p, Refund{Card: "c"}, sqlqueue.WithHeaders(map[string]string{"k": "v"}))
	e.clock.Advance(time.Minute)
	downstream := e.publisher(tb, "downstream") // no propagator of its own
	type seen struct {
		at      time.Time
		ok      bool
		system  string
		headers map[string]string
	}
	got := make(chan seen, 2)
	a := e.app(nil)
	subscribe(e, a, e.endpoint(formOf(f, which), tb, "q"), func(ctx context.Context, m *core.Message[Refund]) error {
		at, ok := m.Delivery().(core.Enqueued).EnqueuedAt()
		got <- seen{at: at, ok: ok, system: m.Delivery().(core.MessagingSystem).MessagingSystem(), headers: m.Headers()}
		if m.Attempt() == 1 {
			return core.Retry()
		}
		return nil
	})
	stop := e.run(a)
	e.rec.WaitSettled(2)
	stop()
	for i := range 2 {
		s := <-got
		if !s.ok {
			t.Fatalf("delivery %d: no EnqueuedAt", i+1)
		}
		e.timeIs("EnqueuedAt", &s.at, published)
		switch s.system {
		case "postgresql", "mysql", "sqlite":
		default:
			t.Errorf("MessagingSystem = %q", s.system)
		}
		if s.headers["traceparent"] != "publisher" || s.headers["k"] != "v" {
			t.Errorf("delivery %d headers %v", i+1, s.headers)
		}
	}
	e.publish(downstream, Refund{Card: "next"}) // a bare context: no trace context to add
	if _, err := sqlqueue.Publish(core.ContextWithPropagator(e.ctx, tagPropagator("context")), downstream, Refund{Card: "next"}); err != nil {
		t.Fatal(err)
	}
	rows := e.rows(tb)
	if len(rows) != 2 || rows[0].Group != "downstream" {
		t.Fatalf("rows %+v", rows)
	}
	if h := rows[0].Headers; len(h) != 0 && string(h) != "null" {
		t.Errorf("published without a propagator: headers %s", h)
	}
	var h map[string]string
	if err := json.Unmarshal(rows[1].Headers, &h); err != nil || h["traceparent"] != "context" {
		t.Fatalf("downstream headers %s (%v): want the context's propagator", rows[1].Headers, err)
	}
}
