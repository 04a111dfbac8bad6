package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// amqpURL is the RabbitMQ the benchmarks run on.
func amqpURL() string {
	return coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
}

// amqpN is how many messages each contender drains at prefetch p (SETTLE_BENCH_AMQP_N, default
// 20000; a quarter of it at prefetch 1, which is round-trip bound).
func amqpN(b *testing.B, p int) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_AMQP_N", "20000"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_AMQP_N=%q: want a positive integer", os.Getenv("SETTLE_BENCH_AMQP_N"))
	}
	if p == 1 {
		n = max(n/4, 1)
	}
	return n
}

// amqpRounds is how many times each contender runs (SETTLE_BENCH_AMQP_ROUNDS, default 2); the
// best round counts, the machine being shared.
func amqpRounds(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_AMQP_ROUNDS", "2"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_AMQP_ROUNDS=%q: want a positive integer", os.Getenv("SETTLE_BENCH_AMQP_ROUNDS"))
	}
	return n
}

// amqpContender consumes and acknowledges n messages already in queue and returns the time.
type amqpContender struct {
	name  string
	drain func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error)
}

var amqpBody = []byte(strings.Repeat("x", 200))

func quorumArgs(quorum bool) amqp091.Table {
	if quorum {
		return amqp091.Table{"x-queue-type": "quorum"}
	}
	return nil
}

// seedAMQP declares a durable queue and puts n persistent 200-byte messages on it, waiting for
// the broker to confirm every one.
func seedAMQP(queue string, quorum bool, n int) error {
	c, err := amqp091.Dial(amqpURL())
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, quorumArgs(quorum)); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := range n {
		if err := ch.PublishWithContext(context.Background(), "", queue, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: strconv.Itoa(i), Body: amqpBody}); err != nil {
			return err
		}
	}
	for range n {
		if c := <-confirms; !c.Ack {
			return fmt.Errorf("seeding %s: publish %d nacked", queue, c.DeliveryTag)
		}
	}
	return nil
}

func deleteAMQP(queue string) {
	if c, err := amqp091.Dial(amqpURL()); err == nil {
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
		}
		_ = c.Close()
	}
}

// rawAMQP is the raw amqp091-go loop: one consumer with basic.qos prefetch, acknowledging each
// message, or with multiple every `every` messages (and on the last).
func rawAMQP(every int) func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
	return func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
		start := time.Now() // every contender is timed from dialling to its N-th acknowledgement
		c, err := amqp091.Dial(amqpURL())
		if err != nil {
			return 0, err
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return 0, err
		}
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return 0, err
		}
		msgs, err := ch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			return 0, err
		}
		k := min(every, prefetch)
		for i := 1; i <= n; i++ {
			var d amqp091.Delivery
			select {
			case d = <-msgs:
			case <-ctx.Done():
				return 0, fmt.Errorf("raw loop: %d of %d: %w", i-1, n, ctx.Err())
			}
			if k <= 1 {
				err = d.Ack(false)
			} else if i%k == 0 || i == n {
				err = d.Ack(true)
			}
			if err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
}

// settleAMQP drains through a settle App: a classic or quorum descriptor with Prefetch(p) (the
// queue exists; settle checks it passively) and a handler that acknowledges.
func settleAMQP(workers int) func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
	return settleAMQPWith(workers, true)
}

// settleAMQPWith is settleAMQP; without withPrefetch the descriptor gets no Prefetch (the
// transport's default window) and prefetch is ignored, and with workers 0 the subscription gets
// no Workers option (core's default).
func settleAMQPWith(workers int, withPrefetch bool) func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
	return func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
		var settled atomic.Int64
		done := make(chan struct{})
		app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals(),
			core.WithObserver(func(s core.Settlement) {
				if s.Err == nil && settled.Add(1) == int64(n) {
					close(done)
				}
			}))
		b, err := amqp.New(amqp.URL(amqpURL()), amqp.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return 0, err
		}
		app.Register(b)
		var ep core.Endpoint
		var qopts []amqp.QuorumOption
		var copts []amqp.ClassicOption
		if withPrefetch {
			qopts = append(qopts, amqp.Prefetch(prefetch))
			copts = append(copts, amqp.Prefetch(prefetch))
		}
		if quorum {
			ep, err = amqp.Quorum(b, queue, qopts...)
		} else {
			ep, err = amqp.Classic(b, queue, copts...)
		}
		if err != nil {
			return 0, err
		}
		subOpts := []core.Option{core.WithCodec(core.Raw)}
		if workers > 0 {
			subOpts = append(subOpts, core.Workers(workers))
		}
		if err := core.Subscribe(app, ep, func(context.Context, *core.Message[[]byte]) error { return nil }, subOpts...); err != nil {
			return 0, err
		}
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		start := time.Now()
		go func() { ran <- app.Run(runCtx) }()
		var elapsed time.Duration
		select {
		case <-done:
			elapsed = time.Since(start)
		case err := <-ran:
			stop()
			return 0, fmt.Errorf("settle stopped after %d of %d: %v", settled.Load(), n, err)
		case <-ctx.Done():
			stop()
			<-ran
			return 0, fmt.Errorf("settle: %d of %d: %w", settled.Load(), n, ctx.Err())
		}
		stop()
		if err := <-ran; err != nil {
			return 0, err
		}
		return elapsed, nil
	}
}

// watermillAMQP drains through watermill-amqp's subscriber with the same prefetch, acknowledging
// each message.
func watermillAMQP(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error) {
	cfg := wamqp.NewDurableQueueConfig(amqpURL())
	cfg.Consume.Qos.PrefetchCount = prefetch
	cfg.Queue.Arguments = quorumArgs(quorum)
	start := time.Now()
	sub, err := wamqp.NewSubscriber(cfg, watermill.NopLogger{})
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, err := sub.Subscribe(subCtx, queue)
	if err != nil {
		return 0, err
	}
	for i := range n {
		select {
		case m, ok := <-msgs:
			if !ok {
				return 0, fmt.Errorf("watermill: closed after %d of %d", i, n)
			}
			m.Ack()
		case <-ctx.Done():
			return 0, fmt.Errorf("watermill: %d of %d: %w", i, n, ctx.Err())
		}
	}
	return time.Since(start), nil
}

// BenchmarkAMQP consumes and acknowledges persistent 200-byte messages through the raw
// amqp091-go loop (per-message and multiple acknowledgements), settle, and watermill-amqp, on
// classic and quorum queues at prefetch 1, 50 and 300, interleaved round by round on one
// server in a balanced order (roundOrder). It prints each contender's best round in msgs/s and
// settle's ratios, and reports the ratios as metrics. SETTLE_BENCH_AMQP_ONLY=classic/50 runs one case;
// SETTLE_BENCH_AMQP_WHO=settle,multiple runs only the contenders whose names contain one of
// the fragments (for profiles and quick comparisons).
func BenchmarkAMQP(b *testing.B) {
	if c, err := amqp091.Dial(amqpURL()); err != nil {
		coretest.ServerUnavailable(b, "RabbitMQ", amqpURL(), err)
	} else {
		_ = c.Close()
	}
	contenders := []amqpContender{
		{"raw", rawAMQP(1)},
		{"raw multiple/50", rawAMQP(50)},
		{"settle w=1", settleAMQP(1)},
		{"settle w=8", settleAMQP(8)},
		{"watermill-amqp", watermillAMQP},
	}
	for range b.N {
		for _, quorum := range []bool{false, true} {
			kind := "classic"
			if quorum {
				kind = "quorum"
			}
			for _, p := range []int{1, 50, 300} {
				if only := os.Getenv("SETTLE_BENCH_AMQP_ONLY"); only != "" && only != fmt.Sprintf("%s/%d", kind, p) {
					continue
				}
				n := amqpN(b, p)
				results := make([]result, len(contenders))
				for round := range amqpRounds(b) {
					for _, i := range roundOrder(round, len(contenders)) {
						c := contenders[i]
						results[i].name = c.name
						if !picked("SETTLE_BENCH_AMQP_WHO", c.name) {
							continue
						}
						q := fmt.Sprintf("settle-bench-%s-p%d-%d-%d", kind, p, round, i)
						if err := seedAMQP(q, quorum, n); err != nil {
							b.Fatalf("seed %s: %v", q, err)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
						d, err := c.drain(ctx, q, quorum, p, n)
						cancel()
						deleteAMQP(q)
						if err != nil {
							b.Fatalf("%s %s p=%d: %v", c.name, kind, p, err)
						}
						results[i].rates = append(results[i].rates, float64(n)/d.Seconds())
					}
				}
				byName, byMedian := map[string]float64{}, map[string]float64{}
				for _, r := range results {
					if len(r.rates) == 0 {
						continue
					}
					byName[r.name], byMedian[r.name] = r.best(), r.median()
					fmt.Printf("%-8s p=%-3d %-16s %8.0f msgs/s best, %8.0f median  (rounds %.0f)\n", kind, p, r.name, r.best(), r.median(), r.rates)
					record(b, Record{Chart: "throughput", Backend: "rabbitmq", Series: r.name + ", " + kind, XName: "prefetch", X: float64(p), Unit: "msgs/s", Values: r.rates})
				}
				settleBest := max(byName["settle w=1"], byName["settle w=8"])
				fmt.Printf("%-8s p=%-3d settle w=1 / raw %.2f; best settle / raw multiple %.2f; best settle / watermill %.2f (bests)\n",
					kind, p, ratio(byName["settle w=1"], byName["raw"]), ratio(settleBest, byName["raw multiple/50"]), ratio(settleBest, byName["watermill-amqp"]))
				settleMed := max(byMedian["settle w=1"], byMedian["settle w=8"])
				fmt.Printf("%-8s p=%-3d settle w=1 / raw %.2f; best settle / raw multiple %.2f; best settle / watermill %.2f (medians)\n",
					kind, p, ratio(byMedian["settle w=1"], byMedian["raw"]), ratio(settleMed, byMedian["raw multiple/50"]), ratio(settleMed, byMedian["watermill-amqp"]))
				b.ReportMetric(ratio(byName["settle w=1"], byName["raw"]), fmt.Sprintf("%s-p%d-settle/raw", kind, p))
				b.ReportMetric(ratio(settleBest, byName["watermill-amqp"]), fmt.Sprintf("%s-p%d-settle/watermill", kind, p))
			}
		}
	}
}

// BenchmarkAMQPDefaults drains a classic and a quorum queue through one settle subscription
// with no option at all (core's default workers, the transport's default window: unlimited on
// a classic queue, amqp.DefaultQuorumPrefetch on a quorum queue) beside the raw amqp091-go loop
// with multiple acknowledgements every 50 at the same window and at a window of 300, interleaved
// round by round in a balanced order (roundOrder).
//
//	go test -run '^$' -bench 'BenchmarkAMQPDefaults$' -benchtime 1x ./bench
//
// SETTLE_BENCH_AMQP_N messages per drain (default 20000), SETTLE_BENCH_AMQP_ROUNDS rounds.
func BenchmarkAMQPDefaults(b *testing.B) {
	if c, err := amqp091.Dial(amqpURL()); err != nil {
		coretest.ServerUnavailable(b, "RabbitMQ", amqpURL(), err)
	} else {
		_ = c.Close()
	}
	wide := rawAMQP(50)
	contenders := []amqpContender{
		{"raw multiple/50", rawAMQP(50)},
		{"settle, defaults", settleAMQPWith(0, false)},
		// The raw loop at the window where BenchmarkAMQP's raw loops ran fastest on this
		// machine: the best raw loop, not only the one at settle's window.
		{"raw multiple/50 window=300", func(ctx context.Context, queue string, quorum bool, _, n int) (time.Duration, error) {
			return wide(ctx, queue, quorum, 300, n)
		}},
	}
	for range b.N {
		for _, quorum := range []bool{false, true} {
			kind, window := "classic", 0 // basic.qos 0: no limit, as a classic queue's default
			if quorum {
				kind, window = "quorum", amqp.DefaultQuorumPrefetch
			}
			n := amqpN(b, 50)
			results := make([]result, len(contenders))
			var ratios, wideRatios []float64
			for round := range amqpRounds(b) {
				var rates [3]float64
				for _, i := range roundOrder(round, len(contenders)) {
					c := contenders[i]
					results[i].name = c.name
					q := fmt.Sprintf("settle-bench-defaults-%s-%d-%d", kind, round, i)
					if err := seedAMQP(q, quorum, n); err != nil {
						b.Fatalf("seed %s: %v", q, err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					d, err := c.drain(ctx, q, quorum, window, n)
					cancel()
					deleteAMQP(q)
					if err != nil {
						b.Fatalf("%s %s: %v", c.name, kind, err)
					}
					rates[i] = float64(n) / d.Seconds()
					results[i].rates = append(results[i].rates, rates[i])
				}
				ratios = append(ratios, rates[1]/rates[0])
				wideRatios = append(wideRatios, rates[1]/rates[2])
			}
			for _, r := range results {
				fmt.Printf("%-8s window=%-3d %-16s %8.0f msgs/s median (rounds %.0f)\n", kind, window, r.name, r.median(), r.rates)
				record(b, Record{Chart: "throughput", Backend: "rabbitmq", Series: r.name + ", " + kind + " defaults", Unit: "msgs/s", Values: r.rates})
			}
			fmt.Printf("%-8s settle defaults / raw multiple/50: %.2f by medians, rounds %.2f\n", kind, ratio(results[1].median(), results[0].median()), ratios)
			fmt.Printf("%-8s settle defaults / raw multiple/50 at window 300: %.2f by medians, rounds %.2f\n", kind, ratio(results[1].median(), results[2].median()), wideRatios)
			b.ReportMetric(ratio(results[1].median(), results[0].median()), kind+"-defaults/raw")
			b.ReportMetric(ratio(results[1].median(), results[2].median()), kind+"-defaults/raw300")
		}
	}
}
