package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
)

// A refund fails until its card processor is back; its dead letter says why, and once the
// processor is back, Redrive sends it home and it is processed. The example runs on the
// in-memory broker of coretest and a virtual clock; every backend's ops.Queue is used the same
// way.
func Example() {
	clk := clock.NewVirtual(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	queues := coretest.NewBroker(clk, nil)
	settled := make(chan core.Settlement, 16)
	app := core.New(core.WithClock(clk), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithoutSignals(), core.WithObserver(func(s core.Settlement) { settled <- s }))
	app.Register(queues)
	processorUp := false
	refund := func(ctx context.Context, m *core.Message[[]byte]) error {
		if !processorUp {
			return core.Retry().Because(errors.New("card processor timeout"))
		}
		return nil
	}
	if err := core.Subscribe(app, queues.Queue("refunds"), refund, core.WithCodec(core.Raw),
		core.DeadLetterAfter(2, "refunds.dead")); err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- app.Run(ctx) }()
	wait := func(n int) {
		for range n {
			<-settled
		}
	}

	queues.Publish("refunds", []byte(`{"id":"r-1"}`), nil)
	wait(2) // a retry, then the dead letter at the cap

	q := queues.Ops("refunds", "refunds.dead")
	page, _ := q.ListDead(ctx, ops.Filter{}, ops.Page{})
	for _, d := range page.Items {
		fmt.Printf("dead letter %s from %s after %d attempts: %s\n", d.ID, d.Origin, d.Count, d.Reason)
	}

	processorUp = true
	n, err := q.Redrive(ctx, ops.Matching(ops.Filter{Reason: "timeout"}), ops.RedriveOptions{})
	fmt.Println("redriven:", n, err)
	wait(1)
	s, _ := q.Stats(ctx)
	fmt.Printf("ready %d, in flight %d, dead %d\n", s.Ready, s.InFlight, s.Dead)

	_, err = q.Purge(ctx, ops.Selection{})
	fmt.Println(err)
	stop()
	<-done
	// Output:
	// dead letter 1 from refunds after 2 attempts: retry at attempt 2 of 2: card processor timeout
	// redriven: 1 <nil>
	// ready 0, in flight 0, dead 0
	// ops: no dead letters selected: name ids, a filter or all
}
