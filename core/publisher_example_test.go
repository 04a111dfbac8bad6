package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

type Payout struct {
	Refund string `json:"refund"`
	Cents  int    `json:"cents"`
}

// Publishing is the same call on every backend; here the target is a queue of the in-memory
// broker, whose clock is virtual.
func ExamplePublisher() {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := coretest.NewBroker(clk, nil)
	refunds, err := core.NewPublisher[Refund](broker.Queue("refunds"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	r, err := refunds.Publish(ctx, Refund{ID: "r-1", Card: "4242"},
		core.MessageID("r-1"), core.OrderingKey("cust-7"), core.DedupKey("refund-r-1"))
	fmt.Println(r.ID, r.Duplicate, err)
	// A second publish with the same dedup key while the first is pending stores nothing.
	r, err = refunds.Publish(ctx, Refund{ID: "r-1", Card: "4242"}, core.DedupKey("refund-r-1"))
	fmt.Println(r.ID, r.Duplicate, err)
	// A delay runs on the backend's clock.
	_, err = refunds.Publish(ctx, Refund{ID: "r-2"}, core.Delay(time.Minute))
	fmt.Println(len(broker.Messages("refunds")), "ready,", len(broker.Scheduled("refunds")), "scheduled", err)
	// An invalid option is refused, naming it.
	_, err = refunds.Publish(ctx, Refund{ID: "r-3"}, core.Priority(300))
	fmt.Println(err)
	// Output:
	// r-1 false <nil>
	// r-1 true <nil>
	// 1 ready, 1 scheduled <nil>
	// settle: publish to "refunds": core.Priority(300): a priority is 1..255 (0 for the default)
}

// A batch is one round trip where the backend can, with one receipt per draft: a refused draft
// does not stop the others.
func ExamplePublisher_PublishBatch() {
	broker := coretest.NewBroker(clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	refunds, _ := core.NewPublisher[Refund](broker.Queue("refunds"))
	rs, err := refunds.PublishBatch(context.Background(), []core.Draft[Refund]{
		{Payload: Refund{ID: "r-1"}, Options: []core.PublishOption{core.MessageID("r-1")}},
		{Payload: Refund{ID: "r-2"}, Options: []core.PublishOption{core.MessageID("")}},
		{Payload: Refund{ID: "r-3"}, Options: []core.PublishOption{core.MessageID("r-3"), core.Priority(9)}},
	})
	for _, r := range rs {
		fmt.Printf("%q %v\n", r.ID, r.Err)
	}
	fmt.Println(err)
	for _, m := range broker.Messages("refunds") {
		fmt.Println(m.ID, "priority", m.Priority)
	}
	// Output:
	// "r-1" <nil>
	// "" draft 1: settle: publish to "refunds": core.MessageID(""): the message id is empty
	// "r-3" <nil>
	// <nil>
	// r-3 priority 9
	// r-1 priority 0
}

// A refund handler that emits a payout: the payout is published only when the refund is
// acknowledged, with an id derived from the refund's delivery (core.ReplyID), so a redelivered
// refund emits the same payout id again and a consumer's inbox can drop the duplicate.
func ExamplePublisher_Reply() {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := coretest.NewBroker(clk, nil)
	settled := make(chan core.Settlement, 4)
	app := core.New(core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(s core.Settlement) { settled <- s }))
	app.Register(broker)
	payouts, _ := core.NewPublisher[Payout](broker.Queue("payouts"))
	replyIDs := make(chan string, 4)
	err := core.Subscribe(app, broker.Queue("refunds"), func(ctx context.Context, m *core.Message[Refund]) error {
		if err := payouts.Reply(ctx, Payout{Refund: m.Payload.ID, Cents: 1250}); err != nil {
			return err
		}
		sub, _ := core.SubscriptionFrom(ctx)
		replyIDs <- core.ReplyID(sub, m.Delivery(), 0)
		if m.Payload.Card == "busy" && m.Attempt() == 1 {
			return core.Retry() // the payout of this attempt is not published
		}
		return nil
	}, core.Replies(payouts))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- app.Run(ctx) }()

	refunds, _ := core.NewPublisher[Refund](broker.Queue("refunds"))
	if _, err := refunds.Publish(ctx, Refund{ID: "r-1", Card: "busy"}); err != nil {
		fmt.Println(err)
	}
	for range 2 {
		s := <-settled
		// The in-memory broker publishes replies to its own queues with the ack itself
		// (core.ReplySettler), so they are in the ack's verdict.
		fmt.Printf("attempt %d: %s, reply id %s, replies with the settlement: %d\n",
			s.Delivery.Attempt(), s.Verdict, <-replyIDs, len(s.Verdict.Replies))
	}
	for _, p := range broker.Messages("payouts") {
		fmt.Println(string(p.Body), p.ID)
	}
	stop()
	<-done
	// Output:
	// attempt 1: retry, reply id b83d4aaa413f3b6d1150404cf2c5af9d, replies with the settlement: 0
	// attempt 2: ack, reply id b83d4aaa413f3b6d1150404cf2c5af9d, replies with the settlement: 1
	// {"refund":"r-1","cents":1250} b83d4aaa413f3b6d1150404cf2c5af9d
}
