package core_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// BenchmarkDispatchLimited is BenchmarkDispatch's raw/workers=4 case under the in-process
// limiter, with limits that never make a delivery wait: what it adds to BenchmarkDispatch is the
// limiter's own cost per delivery.
func BenchmarkDispatchLimited(b *testing.B) {
	for _, c := range []struct {
		name string
		opts func(n int) []core.Option
	}{
		{"concurrency", func(int) []core.Option { return []core.Option{core.Concurrency(4)} }},
		{"rate", func(n int) []core.Option { return []core.Option{core.Rate(1_000_000, time.Second, n+1)} }},
		{"concurrency+rate+pausable", func(n int) []core.Option {
			return []core.Option{core.Concurrency(4), core.Rate(1_000_000, time.Second, n+1), core.Pausable(core.NewMemoryPauseStore())}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			clk := clock.NewVirtual(coretest.Epoch)
			queues := coretest.NewBroker(clk, nil)
			app := core.New(core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
			app.Register(queues)
			var done atomic.Int64
			finished := make(chan struct{})
			target := int64(b.N)
			opts := append([]core.Option{core.Workers(4), core.WithCodec(core.Raw)}, c.opts(b.N)...)
			err := core.Subscribe(app, queues.Queue("q"), func(context.Context, *core.Message[[]byte]) error {
				if done.Add(1) == target {
					close(finished)
				}
				return nil
			}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				queues.Publish("q", []byte("r-1"), nil)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { ran <- app.Run(ctx) }()
			<-finished
			b.StopTimer()
			stop()
			<-ran
		})
	}
}
