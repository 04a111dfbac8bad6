package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// confirmLost is the in-memory queue with a finisher that performs every settlement and then
// reports it with report's error, as a backend whose confirmation got lost (or whose frame was
// refused) would.
type confirmLost struct {
	core.Endpoint
	report error
}

type confirmLostFinisher struct {
	core.Finisher
	report error
}

func (q confirmLost) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := q.Endpoint.Open(ctx, sub)
	return src, confirmLostFinisher{fin, q.report}, err
}

func (f confirmLostFinisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	f.Finisher.Finish(ctx, d, v, func(d core.Delivery, v core.Verdict, err error) {
		if err == nil {
			err = fmt.Errorf("memory: %s of %s: %w", v.Action, d.ID(), f.report)
		}
		settled(d, v, err)
	})
}

// A settlement whose confirmation was lost is reported as unknown — its own event, its own log
// line, an error matching ErrSettlementUnknown — not as a failure that promises the message
// back; one that was refused stays a failure.
func TestSettlementUnknownIsNotAFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report error
		kind   core.EventKind
		log    string
	}{
		{"confirmation lost", core.ErrSettlementUnknown, core.EventSettlementUnknown,
			"settle: settlement unknown; it was sent but not confirmed: the message is gone if the server applied it, and returns as an abandoned one if not"},
		{"refused", errors.New("refused"), core.EventSettlementFailed, "settle: settlement failed; the message returns as an abandoned one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			h := coretest.New(t, core.WithEventObserver(ev.observe))
			if err := core.Subscribe(h.App, confirmLost{h.Broker.Queue("q"), tc.report},
				func(context.Context, *core.Message[Refund]) error { return nil }); err != nil {
				t.Fatal(err)
			}
			h.Start()
			id := h.Publish("q", Refund{ID: "r"})
			s := h.WaitSettled(1)[0]
			if unknown := errors.Is(s.Err, core.ErrSettlementUnknown); s.Err == nil || unknown != (tc.kind == core.EventSettlementUnknown) {
				t.Fatalf("settlement error %v: matches ErrSettlementUnknown %v, want %v", s.Err, unknown, tc.kind == core.EventSettlementUnknown)
			}
			e := <-ev.got
			if e.Kind != tc.kind || e.MessageID != id || e.Attempt != 1 || !errors.Is(e.Err, tc.report) {
				t.Fatalf("event %+v; want %s of %s", e, tc.kind, id)
			}
			recs := h.Logs.Find(tc.log)
			if len(recs) != 1 || recs[0].Attrs["message_id"] != id || recs[0].Attrs["verdict"] != "ack" {
				t.Fatalf("log records %+v; want one %q for %s", recs, tc.log, id)
			}
			if n := len(h.Logs.Find("settle: settlement failed; the message returns as an abandoned one")) + len(h.Logs.Find(
				"settle: settlement unknown; it was sent but not confirmed: the message is gone if the server applied it, and returns as an abandoned one if not")); n != 1 {
				t.Fatalf("%d settlement log lines; want 1", n)
			}
		})
	}
}
