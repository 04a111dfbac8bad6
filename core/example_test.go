package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

type Refund struct {
	ID   string `json:"id"`
	Card string `json:"card"`
}

// A refunds handler that uses every outcome, with a cap of three attempts. It runs here on the
// in-memory queue of coretest and a virtual clock, so the RetryAfter backoff passes with Advance.
func Example() {
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

	refund := func(ctx context.Context, m *core.Message[Refund]) error {
		switch m.Payload.Card {
		case "busy": // the processor is busy: back off, longer each attempt
			return core.RetryAfter(time.Duration(m.Attempt()) * time.Second)
		case "down": // the processor is unavailable: try again now
			return core.Retry()
		case "closed": // the card is closed: retrying cannot help
			return core.Drop().Because(errors.New("card closed"))
		}
		return nil // refunded: ack
	}
	if err := core.Subscribe(app, queues.Queue("refunds"), refund,
		core.DeadLetterAfter(3, "refunds.dead")); err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- app.Run(ctx) }()

	show := func(n int) {
		for range n {
			s := <-settled
			fmt.Printf("attempt %d: %s\n", s.Delivery.Attempt(), s.Verdict)
		}
	}
	for _, card := range []string{"4242", "closed", "down"} {
		queues.Publish("refunds", fmt.Appendf(nil, `{"id":"r-%s","card":%q}`, card, card), nil)
	}
	show(5) // ack, drop, and three deliveries of "down"
	queues.Publish("refunds", []byte(`{"id":"r-busy","card":"busy"}`), nil)
	show(1)
	clk.Advance(time.Second) // releases the first delayed copy
	show(1)
	clk.Advance(2 * time.Second)
	show(1)
	fmt.Println("dead letters:", len(queues.Messages("refunds.dead")))
	stop()
	<-done
	// Output:
	// attempt 1: ack
	// attempt 1: drop
	// attempt 1: retry
	// attempt 2: retry
	// attempt 3: dead_letter(refunds.dead)
	// attempt 1: retry_after(1s)
	// attempt 2: retry_after(2s)
	// attempt 3: dead_letter(refunds.dead)
	// dead letters: 2
}
