package settleotel_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	settleotel "github.com/settlehq/settle/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDispatch is core's BenchmarkDispatch (take → decode → handle → resolve → finish on
// the in-memory backend, raw payload, one worker) with the Telemetry off, on with no-op
// providers, and on with the SDK (every span sampled and ended, metrics aggregated by a manual
// reader; no exporter). ns/op and allocs/op are per message.
func BenchmarkDispatch(b *testing.B) {
	for _, c := range []struct {
		name string
		tel  func(b *testing.B) []core.AppOption
	}{
		{"off", func(*testing.B) []core.AppOption { return nil }},
		{"noop", func(b *testing.B) []core.AppOption {
			t, err := settleotel.New(settleotel.WithTracerProvider(tracenoop.NewTracerProvider()), settleotel.WithMeterProvider(metricnoop.NewMeterProvider()))
			if err != nil {
				b.Fatal(err)
			}
			return t.AppOptions()
		}},
		{"sdk", func(b *testing.B) []core.AppOption {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			t, err := settleotel.New(settleotel.WithTracerProvider(tp), settleotel.WithMeterProvider(mp))
			if err != nil {
				b.Fatal(err)
			}
			return t.AppOptions()
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			clk := clock.NewVirtual(coretest.Epoch)
			queues := coretest.NewBroker(clk, nil)
			app := core.New(append([]core.AppOption{core.WithClock(clk), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler))}, c.tel(b)...)...)
			app.Register(queues)
			var done atomic.Int64
			finished := make(chan struct{})
			target := int64(b.N)
			if err := core.Subscribe(app, queues.Queue("q"), func(context.Context, *core.Message[[]byte]) error {
				if done.Add(1) == target {
					close(finished)
				}
				return nil
			}, core.WithCodec(core.Raw)); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				queues.Publish("q", []byte("r-1"), nil)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			go func() { ran <- app.Run(ctx) }()
			<-finished
			b.StopTimer()
			// On a machine shared with other work, wall time per message says more about the
			// scheduler than about settle: the process's CPU time per message is reported too.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			stop()
			<-ran
		})
	}
}
