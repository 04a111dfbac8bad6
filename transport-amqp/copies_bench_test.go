package amqp_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// BenchmarkCopyPolicy measures what confirming copies costs: n messages, each failing once —
// a retry on a classic queue with a cap (a copy back to the queue) or a RetryAfter(1ms) through
// the DLXTTL waiting queue (a copy to the waiting queue, classic and quorum) — then
// acknowledged, under FireAndForget and under Confirmed (the default). It reports messages per
// second; only failing messages publish copies, so the acknowledgement path is the same in
// both. Run: go test -run XXX -bench CopyPolicy -benchtime 1x ./transport-amqp
func BenchmarkCopyPolicy(b *testing.B) {
	dial := realServer(b)
	const n = 2000
	for _, c := range []struct {
		name   string
		quorum bool
		later  bool
	}{{"classic/retry", false, false}, {"classic/retry_after", false, true}, {"quorum/retry_after", true, true}} {
		for _, p := range []amqp.PublishPolicy{amqp.FireAndForget, amqp.Confirmed} {
			b.Run(c.name+"/"+p.String(), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					be := newBackend(b, dial, nil, c.quorum)
					q := be.name("bench")
					be.name("bench" + amqp.RetrySuffix)
					dead := be.name("bench.dead")
					app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())
					br, err := amqp.New(dial, amqp.DeclareTopology(true), amqp.WithLogger(slog.New(slog.DiscardHandler)))
					if err != nil {
						b.Fatal(err)
					}
					app.Register(br)
					opts := []amqp.QueueOption{amqp.Prefetch(100), amqp.PublishWith(p)}
					if c.later {
						opts = append(opts, amqp.DLXTTL())
					}
					var acked atomic.Int64
					all := make(chan struct{})
					opened, start := make(chan struct{}), make(chan struct{})
					h := func(_ context.Context, m *core.Message[string]) error {
						<-start
						if m.Headers()[amqp.RetryCountHeader] == "" {
							if c.later {
								return core.RetryAfter(time.Millisecond)
							}
							return core.Retry()
						}
						if acked.Add(1) == n {
							close(all)
						}
						return nil
					}
					var ep core.Endpoint
					if c.quorum {
						qo := make([]amqp.QuorumOption, len(opts))
						for i, o := range opts {
							qo[i] = o
						}
						ep, err = amqp.Quorum(br, q, qo...)
					} else {
						co := make([]amqp.ClassicOption, len(opts))
						for i, o := range opts {
							co[i] = o
						}
						ep, err = amqp.Classic(br, q, co...)
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := core.Subscribe(app, notifyOpen{ep, opened}, h, rawCodec, core.Workers(8), core.DeadLetterAfter(5, dead)); err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- app.Run(ctx) }()
					<-opened
					for i := range n {
						if err := be.Publish(ctx, "bench", []byte(strconv.Itoa(i)), nil); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					t0 := time.Now()
					close(start)
					<-all
					el := time.Since(t0)
					b.StopTimer()
					cancel()
					<-done
					b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
				}
			})
		}
	}
}
