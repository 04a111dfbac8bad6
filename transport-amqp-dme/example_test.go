package amqpdme_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	amqp "github.com/settlehq/settle/transport-amqp"
	amqpdme "github.com/settlehq/settle/transport-amqp-dme"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// A busy processor asks for its refund again in 30 seconds; the copy waits in the delayed
// exchange "refunds.delay" and comes back when the (virtual) clock has passed the delay. With a
// real server, pass amqp.URL("amqp://guest:guest@localhost:5672/") to amqp.New instead of the
// in-process broker, and enable the plugin there.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rabbit := amqptest.NewBroker(clk)
	broker, err := amqp.New(rabbit.Dial, amqp.DeclareTopology(true), amqp.WithClock(clk), amqp.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	dme, err := amqpdme.New()
	if err != nil {
		panic(err)
	}
	refunds, err := amqp.Classic(broker, "refunds", amqp.WithDelay(dme))
	if err != nil {
		panic(err)
	}

	settled := make(chan core.Settlement, 2)
	app := core.New(core.WithClock(clk), core.WithLogger(quiet), core.WithoutSignals(),
		core.WithObserver(func(s core.Settlement) { settled <- s }))
	app.Register(broker)
	handled := make(chan string, 2)
	err = core.Subscribe(app, refunds, func(_ context.Context, m *core.Message[string]) error {
		handled <- fmt.Sprintf("attempt %d at +%v", m.Attempt(), clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		if m.Attempt() == 1 {
			return core.RetryAfter(30 * time.Second)
		}
		return nil
	}, core.WithCodec(core.Raw))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	<-app.Ready()

	if err := amqp.Publish(ctx, broker, "", "refunds", "refund-1", amqp.WithPayloadCodec(core.Raw)); err != nil {
		panic(err)
	}
	fmt.Println(<-handled)
	<-settled // the copy is published before the original is acknowledged
	fmt.Println("held in refunds.delay:", rabbit.Held("refunds.delay"))
	clk.Advance(30 * time.Second)
	fmt.Println(<-handled)
	cancel()
	<-done
	// Output:
	// attempt 1 at +0s
	// held in refunds.delay: 1
	// attempt 2 at +30s
}
