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

// Concurrency and Rate across processes: every replica mounting this subscription with the same
// store runs at most 2 handlers per customer at once and starts at most 10 a second overall.
func ExampleConcurrency() {
	clk := clock.NewVirtual(coretest.Epoch)
	queues := coretest.NewBroker(clk, nil)
	app := core.New(core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(queues)

	store := core.NewMemoryLimitStore() // sqllimit.New(db.Queue(), db.Dialect()) to share it between processes
	pay := func(ctx context.Context, m *core.Message[string]) error {
		if m.Payload == "busy" { // the provider answered 429 with Retry-After: 30
			return core.Throttled(30*time.Second, errors.New("provider: too many requests"))
		}
		return nil
	}
	err := core.Subscribe(app, queues.Queue("payments"), pay, core.Workers(8),
		core.Concurrency(2, core.SharedIn(store), core.PerKey(core.OrderingKeyOf)),
		core.Rate(10, time.Second, 5, core.SharedIn(store)),
		core.Pausable(core.NewMemoryPauseStore()))
	fmt.Println("mounted:", err == nil)
	// Output: mounted: true
}
