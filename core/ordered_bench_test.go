package core_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// BenchmarkOrdered measures what ordering costs on the in-memory broker: b.N messages, published
// beforehand, handled by eight workers that acknowledge at once — unordered, ordered over 1,000
// keys, and ordered with every message on one hot key (one at a time by definition).
func BenchmarkOrdered(b *testing.B) {
	for _, c := range []struct {
		name    string
		keys    int // 0: no key
		ordered bool
	}{
		{"unordered-1000-keys", 1000, false},
		{"ordered-1000-keys", 1000, true},
		{"ordered-1-hot-key", 1, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			keys := make([]core.PublishOption, c.keys)
			for i := range keys {
				keys[i] = core.OrderingKey("k" + strconv.Itoa(i))
			}
			queues := coretest.NewBroker(clock.Real(), nil)
			pub, _ := core.NewPublisher[string](queues.Queue("q"), core.PublishCodec(core.Raw))
			ctx := context.Background()
			for i := range b.N {
				if _, err := pub.Publish(ctx, "m", keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			all := make(chan struct{})
			app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())
			app.Register(queues)
			opts := []core.Option{core.Workers(8), core.WithCodec(core.Raw)}
			if c.ordered {
				opts = append(opts, core.Ordered())
			}
			h := func(context.Context, *core.Message[string]) error {
				if left.Add(-1) == 0 {
					close(all)
				}
				return nil
			}
			if err := core.Subscribe(app, queues.Queue("q"), h, opts...); err != nil {
				b.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			runtime.GC() // the publishing's garbage is not the handling's
			b.ResetTimer()
			go func() { done <- app.Run(runCtx) }()
			<-all
			b.StopTimer()
			stop()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
