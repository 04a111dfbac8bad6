package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// natsURL is the NATS server (with JetStream) the benchmarks run on.
func natsURL() string { return coretest.Env("SETTLE_TEST_NATS_URL", "nats://127.0.0.1:4222") }

func natsEnvInt(b *testing.B, key, def string) int {
	n, err := strconv.Atoi(coretest.Env(key, def))
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", key, os.Getenv(key))
	}
	return n
}

var natsBody = []byte(strings.Repeat("x", 200))

// natsContender drains n messages from the stream's durable consumer and returns the time.
type natsContender struct {
	name string
	ack  jetstream.AckPolicy // the consumer the contender needs
	// drain consumes and acknowledges n messages fetching batches of batch.
	drain func(ctx context.Context, stream, subject string, batch, n int) (time.Duration, error)
}

// seedNATS creates a file-stored stream capturing subject with a durable pull consumer of the
// given ack policy, and publishes n 200-byte messages, each acknowledged by the stream. The
// stream has work-queue retention, or interest retention for an AckAll consumer (a work queue
// requires explicit acks): either way an acknowledged message leaves the stream.
func seedNATS(ctx context.Context, js jetstream.JetStream, stream, subject string, ack jetstream.AckPolicy, n int) error {
	retention := jetstream.WorkQueuePolicy
	if ack == jetstream.AckAllPolicy {
		retention = jetstream.InterestPolicy
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject},
		Retention: retention, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	if _, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: stream, AckPolicy: ack,
		FilterSubject: subject, AckWait: 30 * time.Second, MaxAckPending: 20000}); err != nil {
		return err
	}
	for range n {
		if _, err := js.PublishAsync(subject, natsBody, jetstream.WithStallWait(time.Minute)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawConsumer connects a raw loop of its own and opens the stream's durable consumer (named
// after the stream).
func rawConsumer(ctx context.Context, stream string) (*nats.Conn, jetstream.Consumer, error) {
	nc, err := nats.Connect(natsURL())
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var cons jetstream.Consumer
		if cons, err = js.Consumer(ctx, stream, stream); err == nil {
			return nc, cons, nil
		}
	}
	nc.Close()
	return nil, nil, err
}

// rawNATS is the raw nats.go loop: Fetch(batch) on the durable consumer, then either Ack every
// message (ackAll false) or, on an AckAll consumer, only the last of each batch.
func rawNATS(ackAll bool) func(ctx context.Context, stream, subject string, batch, n int) (time.Duration, error) {
	return func(ctx context.Context, stream, _ string, batch, n int) (time.Duration, error) {
		start := time.Now()
		nc, cons, err := rawConsumer(ctx, stream)
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		got := 0
		for got < n {
			mb, err := cons.Fetch(min(batch, n-got), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return 0, err
			}
			var last jetstream.Msg
			for m := range mb.Messages() {
				got++
				if ackAll {
					last = m
				} else if err := m.Ack(); err != nil {
					return 0, err
				}
			}
			if err := mb.Error(); err != nil {
				return 0, err
			}
			if last != nil {
				if err := last.Ack(); err != nil {
					return 0, err
				}
			}
			if ctx.Err() != nil {
				return 0, fmt.Errorf("raw: %d of %d: %w", got, n, ctx.Err())
			}
		}
		if err := nc.Flush(); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
}

// rawNATSDoubleAck is the raw loop for confirmed acknowledgements: Fetch(batch), then each
// message's DoubleAck (the +ACK sent as a request, done when the server answers) on a
// goroutine of its own, so that the loop fetches on while answers come back — the frames
// settle sends by default, with its confirmations off the workers. Done when every answer
// came.
func rawNATSDoubleAck(ctx context.Context, stream, _ string, batch, n int) (time.Duration, error) {
	start := time.Now()
	nc, cons, err := rawConsumer(ctx, stream)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	got := 0
	for got < n && failed.Load() == nil {
		mb, err := cons.Fetch(min(batch, n-got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, err
		}
		for m := range mb.Messages() {
			got++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.DoubleAck(ctx); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}()
		}
		if err := mb.Error(); err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("raw double-ack: %d of %d: %w", got, n, ctx.Err())
		}
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return time.Since(start), nil
}

// settleNATS drains through a settle App: natsjs.NewQueue on the existing stream and consumer
// (checked, not declared) and a handler that acknowledges — with workers 0, every default (one
// worker, the automatic fetch size; batch is ignored); otherwise that many workers and
// natsjs.FetchBatch(batch).
func settleNATS(workers int, extra ...natsjs.QueueOption) func(ctx context.Context, stream, subject string, batch, n int) (time.Duration, error) {
	return func(ctx context.Context, stream, subject string, batch, n int) (time.Duration, error) {
		opts := append([]natsjs.QueueOption{natsjs.Stream(stream), natsjs.Durable(stream)}, extra...)
		if workers > 0 {
			opts = append(opts, natsjs.FetchBatch(batch))
		}
		return settleNATSDrain(ctx, subject, workers, n, opts)
	}
}

func settleNATSDrain(ctx context.Context, subject string, workers, n int, opts []natsjs.QueueOption) (time.Duration, error) {
	var settled atomic.Int64
	done := make(chan struct{})
	log := slog.New(slog.DiscardHandler)
	app := core.New(core.WithLogger(log), core.WithoutSignals(),
		core.WithObserver(func(s core.Settlement) {
			if s.Err == nil && settled.Add(1) == int64(n) {
				close(done)
			}
		}))
	start := time.Now()
	conn, err := natsjs.New(natsURL(), natsjs.WithLogger(log))
	if err != nil {
		return 0, err
	}
	app.Register(conn)
	q, err := natsjs.NewQueue(conn, subject, opts...)
	if err != nil {
		return 0, err
	}
	subOpts := []core.Option{core.WithCodec(core.Raw)}
	if workers > 0 {
		subOpts = append(subOpts, core.Workers(workers))
	}
	if err := core.Subscribe(app, q, func(context.Context, *core.Message[[]byte]) error { return nil }, subOpts...); err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- app.Run(runCtx) }()
	var elapsed time.Duration
	select {
	case <-done:
		elapsed = time.Since(start)
	case err := <-ran:
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

// BenchmarkNATS drains durable pull consumers of file-stored work-queue streams, 200-byte
// messages, through the raw nats.go jetstream loop (Fetch(batch), Ack per message; and on an
// AckAll consumer, one Ack per batch) and through settle (an ack per message: with every
// default — one worker, the automatic fetch size, whatever the batch — and with Workers(8) and
// FetchBatch(batch)), at batch 1, 50 and 200, interleaved round by round on one server. It
// prints each contender's best and median msgs/s, allocations per message and process CPU per
// message (client included), and reports settle ÷ the raw loop sending the same frames
// (medians) as metrics.
// SETTLE_BENCH_NATS_N (default 20000; a tenth at batch 1), SETTLE_BENCH_NATS_ROUNDS (default
// 3), SETTLE_BENCH_NATS_ONLY=50 runs one batch size, SETTLE_BENCH_NATS_WHO=settle picks
// contenders.
func BenchmarkNATS(b *testing.B) {
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err != nil {
		coretest.ServerUnavailable(b, "NATS with JetStream", natsURL(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	contenders := []natsContender{
		{"raw ack-each", jetstream.AckExplicitPolicy, rawNATS(false)},
		{"raw ack-all", jetstream.AckAllPolicy, rawNATS(true)},
		{"raw double-ack", jetstream.AckExplicitPolicy, rawNATSDoubleAck},
		{"settle defaults", jetstream.AckExplicitPolicy, settleNATS(0)},
		{"settle w=8", jetstream.AckExplicitPolicy, settleNATS(8)},
		{"settle w=8 unconfirmed", jetstream.AckExplicitPolicy, settleNATS(8, natsjs.UnconfirmedAcks())},
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	run := "settle_bench_" + hex.EncodeToString(id[:])
	for range b.N {
		for _, batch := range []int{1, 50, 200} {
			if only := os.Getenv("SETTLE_BENCH_NATS_ONLY"); only != "" && only != strconv.Itoa(batch) {
				continue
			}
			n := natsEnvInt(b, "SETTLE_BENCH_NATS_N", "20000")
			if batch == 1 {
				n = max(n/10, 1)
			}
			results := make([]result, len(contenders))
			allocs := make([]float64, len(contenders))
			bytes := make([]float64, len(contenders)) // allocated bytes per message (GC work)
			cpu := make([][]float64, len(contenders)) // process CPU µs per message, per round
			for round := range natsEnvInt(b, "SETTLE_BENCH_NATS_ROUNDS", "3") {
				for _, i := range roundOrder(round, len(contenders)) {
					c := contenders[i]
					results[i].name = c.name
					if !picked("SETTLE_BENCH_NATS_WHO", c.name) {
						continue
					}
					stream := fmt.Sprintf("%s_b%d_r%d_c%d", run, batch, round, i)
					subject := strings.ReplaceAll(stream, "_", ".")
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					if err := seedNATS(ctx, js, stream, subject, c.ack, n); err != nil {
						_ = js.DeleteStream(context.Background(), stream)
						cancel()
						b.Fatalf("seed %s: %v", stream, err)
					}
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					cpu0 := processCPU()
					// Labelled for -cpuprofile: the goroutines the drain starts (its connection's
					// included) carry the contender's name (pprof -tagfocus contender=...).
					var d time.Duration
					var err error
					pprof.Do(ctx, pprof.Labels("contender", c.name), func(ctx context.Context) {
						d, err = c.drain(ctx, stream, subject, batch, n)
					})
					cpu[i] = append(cpu[i], float64((processCPU()-cpu0).Microseconds())/float64(n))
					runtime.ReadMemStats(&after)
					_ = js.DeleteStream(context.Background(), stream)
					cancel()
					if err != nil {
						b.Fatalf("%s batch %d: %v", c.name, batch, err)
					}
					results[i].rates = append(results[i].rates, float64(n)/d.Seconds())
					allocs[i] = float64(after.Mallocs-before.Mallocs) / float64(n)
					bytes[i] = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
				}
			}
			best, med := map[string]float64{}, map[string]float64{}
			for i, r := range results {
				if len(r.rates) == 0 {
					continue
				}
				best[r.name], med[r.name] = r.best(), r.median()
				fmt.Printf("batch %-3d %-13s %8.0f msgs/s best, %8.0f median, %5.1f allocs/msg, %5.0f B/msg, %5.1f µs CPU/msg (median)  (rounds %.0f)\n",
					batch, r.name, r.best(), r.median(), allocs[i], bytes[i], result{rates: cpu[i]}.median(), r.rates)
				record(b, Record{Chart: "throughput", Backend: "nats", Series: r.name, XName: "batch", X: float64(batch), Unit: "msgs/s", Values: r.rates})
			}
			// Like for like: settle's confirmed acks (the default) against the raw loop that
			// sends the same requests; UnconfirmedAcks against the raw Ack per message.
			for _, p := range [][2]string{{"settle defaults", "raw double-ack"}, {"settle w=8", "raw double-ack"},
				{"settle w=8 unconfirmed", "raw ack-each"}, {"settle w=8 unconfirmed", "raw ack-all"}} {
				if best[p[0]] == 0 || best[p[1]] == 0 {
					continue
				}
				fmt.Printf("batch %-3d %-22s / %-14s %.2f best, %.2f median\n", batch, p[0], p[1],
					ratio(best[p[0]], best[p[1]]), ratio(med[p[0]], med[p[1]]))
			}
			b.ReportMetric(ratio(med["settle defaults"], med["raw double-ack"]), fmt.Sprintf("b%d-defaults/raw-double", batch))
			b.ReportMetric(ratio(med["settle w=8"], med["raw double-ack"]), fmt.Sprintf("b%d-settle-w8/raw-double", batch))
			b.ReportMetric(ratio(med["settle w=8 unconfirmed"], med["raw ack-each"]), fmt.Sprintf("b%d-unconfirmed/raw-each", batch))
		}
	}
}

// processCPU is the CPU time (user and system) the process has used so far: on a shared machine
// it measures a contender's own cost better than its throughput, which also depends on what
// else runs (the server included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
