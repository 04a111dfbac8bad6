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

// A batch handler that stores refunds many at a time and answers for each: a refund to a closed
// card is dropped, one whose processor is busy retries later, the others are acknowledged. It
// runs here on the in-memory queue of coretest and a virtual clock.
func ExampleSubscribeBatch() {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	queues := coretest.NewBroker(clk, nil)
	settled := make(chan core.Settlement, 16)
	app := core.New(
		core.WithClock(clk),
		core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithoutSignals(),
		core.WithObserver(func(s core.Settlement) { settled <- s }),
	)
	app.Register(queues)

	store := func(ctx context.Context, batch []*core.Message[Refund]) error {
		fmt.Println("batch of", len(batch))
		result := core.NewBatchResult(len(batch))
		for i, m := range batch {
			switch m.Payload.Card {
			case "closed":
				result.Drop(i)
			case "busy":
				result.RetryAfter(i, time.Minute)
			default:
				result.Ack(i) // one INSERT of every acknowledged row would go here
			}
		}
		return result
	}
	err := core.SubscribeBatch(app, queues.Queue("refunds"), store,
		core.BatchSize(3), core.BatchWait(time.Second), core.DeadLetterAfter(3, "refunds.dead"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, card := range []string{"4242", "closed", "busy"} {
		queues.Publish("refunds", fmt.Appendf(nil, `{"id":"r-%s","card":%q}`, card, card), nil)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	for range 3 {
		s := <-settled
		fmt.Println(string(s.Delivery.Body()), s.Verdict)
	}
	stop()
	<-done

	// Output:
	// batch of 3
	// {"id":"r-4242","card":"4242"} ack
	// {"id":"r-closed","card":"closed"} drop
	// {"id":"r-busy","card":"busy"} retry_after(1m0s)
}
