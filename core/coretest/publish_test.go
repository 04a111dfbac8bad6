package coretest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// fatalTB records the first Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	if f.msg == "" {
		f.msg = fmt.Sprintf(format, args...)
	}
}

func TestRequirePublished(t *testing.T) {
	b := coretest.NewBroker(clock.NewVirtual(coretest.Epoch), nil)
	payouts, _ := core.NewPublisher[payout](b.Queue("payouts"))
	raw, _ := core.NewPublisher[string](b.Queue("notes"), core.PublishCodec(core.Raw))
	ctx := context.Background()
	payouts.Publish(ctx, payout{ID: "p-1"}, core.MessageID("m-1"))
	payouts.Publish(ctx, payout{ID: "p-2"}, core.Delay(time.Hour))
	payouts.Publish(ctx, payout{ID: "p-2"})
	raw.Publish(ctx, "hello")

	got := coretest.RequirePublished(t, b, "payouts", func(p payout) bool { return p.ID == "p-1" })
	if got.ID != "m-1" || got.ContentType != "application/json" {
		t.Fatalf("found %+v", got)
	}
	if n := coretest.RequirePublished[string](t, b, "notes", nil); string(n.Body) != "hello" {
		t.Fatalf("found %+v", n)
	}

	for _, c := range []struct {
		match func(payout) bool
		want  string
	}{
		{func(p payout) bool { return p.ID == "p-9" }, `coretest.RequirePublished: queue "payouts" holds 3 messages, none a coretest_test.payout that matches`},
		{func(p payout) bool { return p.ID == "p-2" }, `queue "payouts" holds 2 messages that are a coretest_test.payout that matches, want exactly one`},
	} {
		tb := &fatalTB{TB: t}
		coretest.RequirePublished(tb, b, "payouts", c.match)
		if !strings.Contains(tb.msg, c.want) {
			t.Errorf("failure %q, want %q", tb.msg, c.want)
		}
		if !strings.Contains(tb.msg, `{"ID":"p-2"}`) {
			t.Errorf("failure %q does not list the messages", tb.msg)
		}
	}
}

// A dedup key is pending from its publish until its message is acknowledged, dropped or
// dead-lettered: a retry keeps it.
func TestDedupKeyPendingUntilSettled(t *testing.T) {
	h := coretest.New(t)
	coretest.Subscribe(h, "payouts", func(ctx context.Context, m *core.Message[payout]) error {
		if m.Attempt() == 1 {
			return core.RetryAfter(30 * time.Second)
		}
		return nil
	})
	h.Start()
	pub, _ := core.NewPublisher[payout](h.Broker.Queue("payouts"))
	ctx := context.Background()
	first, err := pub.Publish(ctx, payout{ID: "p-1"}, core.DedupKey("k"))
	if err != nil || first.Duplicate {
		t.Fatalf("first publish %+v, %v", first, err)
	}
	h.WaitSettled(1)
	again, err := pub.Publish(ctx, payout{ID: "p-1"}, core.DedupKey("k"))
	if err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("publish while the first waits for its retry: %+v, %v; want a duplicate of %s", again, err, first.ID)
	}
	h.Advance(30 * time.Second)
	h.WaitSettled(2)
	after, err := pub.Publish(ctx, payout{ID: "p-1"}, core.DedupKey("k"))
	if err != nil || after.Duplicate {
		t.Fatalf("publish after the ack: %+v, %v; want it stored", after, err)
	}
}

// An abandoned delivery returns in front of the messages of its priority or below, behind
// higher ones published meanwhile.
func TestAbandonedReturnsWithinItsPriority(t *testing.T) {
	h := coretest.New(t)
	entered := make(chan struct{}, 1)
	coretest.Subscribe(h, "jobs", func(ctx context.Context, m *core.Message[payout]) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	h.Start()
	pub, _ := core.NewPublisher[payout](h.Broker.Queue("jobs"))
	ctx := context.Background()
	pub.Publish(ctx, payout{ID: "held"}, core.Priority(5), core.MessageID("held"))
	<-entered
	pub.Publish(ctx, payout{ID: "low"}, core.MessageID("low"))
	pub.Publish(ctx, payout{ID: "high"}, core.Priority(9), core.MessageID("high"))
	pub.Publish(ctx, payout{ID: "same"}, core.Priority(5), core.MessageID("same"))
	armed := h.Clock.Pending()
	stopped := make(chan struct{})
	go func() { h.Stop(); close(stopped) }()
	if err := h.Clock.BlockUntil(ctx, armed+1); err != nil {
		t.Fatal(err)
	}
	h.Advance(time.Minute)
	<-stopped
	var order []string
	for _, m := range h.Broker.Messages("jobs") {
		order = append(order, m.ID)
	}
	if fmt.Sprint(order) != "[high held same low]" {
		t.Fatalf("ready %v, want [high held same low]", order)
	}
}

func TestCloseDropsScheduledMessages(t *testing.T) {
	clk := clock.NewVirtual(coretest.Epoch)
	b := coretest.NewBroker(clk, nil)
	pub, _ := core.NewPublisher[payout](b.Queue("payouts"))
	if _, err := pub.Publish(context.Background(), payout{}, core.Delay(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Scheduled("payouts")); n != 1 {
		t.Fatalf("%d scheduled", n)
	}
	b.Close()
	clk.Advance(time.Hour)
	if n := len(b.Scheduled("payouts")) + len(b.Messages("payouts")); n != 0 {
		t.Fatalf("%d messages after Close", n)
	}
	if _, err := pub.Publish(context.Background(), payout{}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("publish to a closed broker: %v", err)
	}
	late, _ := core.NewPublisher[payout](b.Queue("payouts"))
	if _, err := late.Publish(context.Background(), payout{}); !errors.Is(err, core.ErrClosed) ||
		!strings.Contains(err.Error(), `in-memory queue "payouts"`) {
		t.Fatalf("opening a sender on a closed broker: %v", err)
	}
}
