package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// events collects an App's events (core.WithEventObserver).
type events struct {
	mu  sync.Mutex
	all []core.Event
}

func (e *events) observe(ev core.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) of(kind core.EventKind) []core.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// An ack (or a drop's +TERM) that reached the server, which applied it, and whose answer was
// lost is reported as unknown — ErrSettlementUnknown, its own event and log line — not as a
// failure that says the message comes back: the message is gone. The handler mutes the server's
// side of the connection (a proxy of the test's own) before it returns: the frame reaches the
// server, its answer does not reach the client.
func TestSettlementWithLostConfirmationReportedUnknown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome error
		action  core.Action
	}{
		{"ack", nil, core.ActAck},
		{"drop", core.Drop(), core.ActDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, url string) {
				settleWithLostConfirmation(t, url, tc.outcome, tc.action)
			})
		})
	}
}

func settleWithLostConfirmation(t *testing.T, url string, outcome error, action core.Action) {
	p := coretest.NewProxy(t, strings.TrimPrefix(url, "nats://"))
	r := newRig(t, "nats://"+p.Addr(), clock.Real(), natsjs.DeclareTopology(true), natsjs.RequestTimeout(300*time.Millisecond))
	direct := newAdmin(t, url) // reads the server past the proxy
	r.admin = direct
	direct.deleteStreamsOnCleanup(t, r.prefix)
	ev := r.events
	if err := core.Subscribe(r.app, r.queue("refunds"), func(context.Context, *core.Message[string]) error {
		p.MuteServer()
		return outcome
	}, core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	r.publish("refunds", "m", nil)
	s := r.rec.WaitSettled(1)[0]
	if s.Verdict.Action != action || !errors.Is(s.Err, natsjs.ErrSettlementUnknown) || !errors.Is(s.Err, core.ErrSettlementUnknown) {
		t.Fatalf("settlement %v, error %v; want %v reported unknown (natsjs.ErrSettlementUnknown, core.ErrSettlementUnknown)", s.Verdict.Action, s.Err, action)
	}
	t.Logf("reported: %v", s.Err)
	// The server applied it: the message is gone, the consumer's ack floor is past it.
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	st, err := direct.js.Stream(ctx, r.stream("refunds"))
	if err != nil {
		t.Fatal(err)
	}
	si, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.Consumer(ctx, r.stream("refunds"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 0 || ci.AckFloor.Stream != 1 || ci.NumAckPending != 0 {
		t.Fatalf("stream holds %d messages, ack floor %d, %d pending acknowledgement; want the %v applied (0, 1, 0)",
			si.State.Msgs, ci.AckFloor.Stream, ci.NumAckPending, action)
	}
	if got := ev.of(core.EventSettlementUnknown); len(got) != 1 || got[0].MessageID != s.Delivery.ID() || got[0].Attempt != 1 {
		t.Fatalf("settlement_unknown events %+v; want one for %s", got, s.Delivery.ID())
	}
	if got := ev.of(core.EventSettlementFailed); len(got) != 0 {
		t.Fatalf("settlement_failed events %+v; want none", got)
	}
	recs := r.logs.Find("settle: settlement unknown; it was sent but not confirmed: the message is gone if the server applied it, and returns as an abandoned one if not")
	if len(recs) != 1 || recs[0].Attrs["message_id"] != s.Delivery.ID() {
		t.Fatalf("unknown-settlement log lines %+v; want one for %s", recs, s.Delivery.ID())
	}
	p.Cut() // the muted connection goes; the client reconnects and the App stops cleanly
	p.Restore()
}
