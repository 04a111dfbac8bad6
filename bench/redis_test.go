package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	redisq "github.com/settlehq/settle/transport-redis"
)

// redisURL is the Redis server the benchmarks run on.
func redisURL() string { return coretest.Env("SETTLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0") }

// redisContender drains n messages of one key (a stream, or an Asynq queue) and returns the time.
type redisContender struct {
	name string
	// asynq: the contender needs its messages as Asynq tasks, not stream entries.
	asynq bool
	drain func(ctx context.Context, key string, batch, n int) (time.Duration, error)
}

// seedStream adds n 200-byte entries to the stream key (pipelined) and creates the group
// "settle" on it.
func seedStream(ctx context.Context, rdb *redis.Client, key string, n int) error {
	for done := 0; done < n; {
		p := rdb.Pipeline()
		for i := 0; i < 1000 && done < n; i, done = i+1, done+1 {
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{redisq.BodyField, natsBody}})
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return rdb.XGroupCreate(ctx, key, "settle", "0").Err()
}

// rawRedis is the raw go-redis loop: XREADGROUP COUNT batch, then for each entry XACK and XDEL
// in one round trip (perEntry), or one XACK and one XDEL of the whole batch.
func rawRedis(perEntry bool) func(ctx context.Context, key string, batch, n int) (time.Duration, error) {
	return func(ctx context.Context, key string, batch, n int) (time.Duration, error) {
		opts, err := redis.ParseURL(redisURL())
		if err != nil {
			return 0, err
		}
		start := time.Now()
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		args := &redis.XReadGroupArgs{Group: "settle", Consumer: "raw", Streams: []string{key, ">"}, Count: int64(batch), Block: 5 * time.Second}
		ids := make([]string, 0, batch)
		for got := 0; got < n; {
			res, err := rdb.XReadGroup(ctx, args).Result()
			if err != nil {
				return 0, fmt.Errorf("raw: %d of %d: %w", got, n, err)
			}
			ids = ids[:0]
			for _, m := range res[0].Messages {
				got++
				if perEntry {
					p := rdb.Pipeline()
					p.XAck(ctx, key, "settle", m.ID)
					p.XDel(ctx, key, m.ID)
					if _, err := p.Exec(ctx); err != nil {
						return 0, err
					}
					continue
				}
				ids = append(ids, m.ID)
			}
			if len(ids) > 0 {
				p := rdb.Pipeline()
				p.XAck(ctx, key, "settle", ids...)
				p.XDel(ctx, key, ids...)
				if _, err := p.Exec(ctx); err != nil {
					return 0, err
				}
			}
		}
		return time.Since(start), nil
	}
}

// settleRedis drains through a settle App on the stream (group "settle"): with workers 0,
// every default (one worker, reads of one); otherwise that many workers and Batch(batch).
func settleRedis(workers int) func(ctx context.Context, key string, batch, n int) (time.Duration, error) {
	return func(ctx context.Context, key string, batch, n int) (time.Duration, error) {
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
		c, err := redisq.Open(redisURL(), redisq.WithLogger(log))
		if err != nil {
			return 0, err
		}
		app.Register(c)
		var qopts []redisq.QueueOption
		subOpts := []core.Option{core.WithCodec(core.Raw)}
		if workers > 0 {
			qopts = append(qopts, redisq.Batch(batch))
			subOpts = append(subOpts, core.Workers(workers))
		}
		q, err := redisq.NewQueue(c, key, qopts...)
		if err != nil {
			return 0, err
		}
		if err := core.Subscribe(app, q, func(context.Context, *core.Message[[]byte]) error { return nil }, subOpts...); err != nil {
			return 0, err
		}
		return runUntil(ctx, app, done, &settled, n, start)
	}
}

// runUntil runs app until done is closed (n settled) and returns the time since start.
func runUntil(ctx context.Context, app *core.App, done chan struct{}, settled *atomic.Int64, n int, start time.Time) (time.Duration, error) {
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

// asynqOpt is the Asynq connection to the benchmark's server.
func asynqOpt() (asynq.RedisClientOpt, error) {
	o, err := redis.ParseURL(redisURL())
	if err != nil {
		return asynq.RedisClientOpt{}, err
	}
	return asynq.RedisClientOpt{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB}, nil
}

// seedAsynq enqueues n 200-byte tasks on the Asynq queue key.
func seedAsynq(key string, n int) error {
	opt, err := asynqOpt()
	if err != nil {
		return err
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	for range n {
		if _, err := client.Enqueue(asynq.NewTask("bench", natsBody), asynq.Queue(key), asynq.MaxRetry(0)); err != nil {
			return err
		}
	}
	return nil
}

// asynqDrain runs an Asynq server with concurrency 8 on the queue until n tasks succeeded.
func asynqDrain(ctx context.Context, key string, _, n int) (time.Duration, error) {
	opt, err := asynqOpt()
	if err != nil {
		return 0, err
	}
	var handled atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 8, Queues: map[string]int{key: 1}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(context.Context, *asynq.Task) error {
		if handled.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	select {
	case <-done:
		return time.Since(start), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("asynq: %d of %d: %w", handled.Load(), n, ctx.Err())
	}
}

// BenchmarkRedis drains 200-byte messages on the Redis at SETTLE_TEST_REDIS_URL through the raw
// go-redis loop (XREADGROUP COUNT batch, then XACK and XDEL per entry, or per batch), through
// settle (a fenced ack script per message: with every default, and with Workers(8) and
// Batch(batch)), and through Asynq (concurrency 8; tasks enqueued with its client), at batch 1
// and 50, interleaved round by round. It prints each contender's best and median msgs/s and
// allocations per message, and reports settle ÷ the raw per-entry loop and settle ÷ Asynq
// (medians) as metrics. SETTLE_BENCH_REDIS_N (default 10000; a tenth at batch 1),
// SETTLE_BENCH_REDIS_ROUNDS (default 3), SETTLE_BENCH_REDIS_WHO picks contenders.
func BenchmarkRedis(b *testing.B) {
	opts, err := redis.ParseURL(redisURL())
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		coretest.ServerUnavailable(b, "Redis", redisURL(), err)
	}
	contenders := []redisContender{
		{name: "raw ack-each", drain: rawRedis(true)},
		{name: "raw ack-batch", drain: rawRedis(false)},
		{name: "settle defaults", drain: settleRedis(0)},
		{name: "settle w=8", drain: settleRedis(8)},
		{name: "asynq c=8", asynq: true, drain: asynqDrain},
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	run := "settle-bench-" + hex.EncodeToString(id[:])
	for range b.N {
		for _, batch := range []int{1, 50} {
			n := natsEnvInt(b, "SETTLE_BENCH_REDIS_N", "10000")
			if batch == 1 {
				n = max(n/10, 1)
			}
			results := make([]result, len(contenders))
			allocs := make([]float64, len(contenders))
			for round := range natsEnvInt(b, "SETTLE_BENCH_REDIS_ROUNDS", "3") {
				for _, i := range roundOrder(round, len(contenders)) {
					c := contenders[i]
					results[i].name = c.name
					if !picked("SETTLE_BENCH_REDIS_WHO", c.name) {
						continue
					}
					key := fmt.Sprintf("%s-b%d-r%d-c%d", run, batch, round, i)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					if c.asynq {
						err = seedAsynq(key, n)
					} else {
						err = seedStream(ctx, rdb, key, n)
					}
					if err != nil {
						cancel()
						b.Fatalf("seed %s: %v", key, err)
					}
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					d, err := c.drain(ctx, key, batch, n)
					runtime.ReadMemStats(&after)
					cancel()
					_ = rdb.Del(context.Background(), key, key+redisq.DelayedSuffix).Err()
					if err != nil {
						b.Fatalf("%s batch %d: %v", c.name, batch, err)
					}
					results[i].rates = append(results[i].rates, float64(n)/d.Seconds())
					allocs[i] = float64(after.Mallocs-before.Mallocs) / float64(n)
				}
			}
			med := map[string]float64{}
			for i, r := range results {
				if len(r.rates) == 0 {
					continue
				}
				med[r.name] = r.median()
				fmt.Printf("batch %-3d %-15s %8.0f msgs/s best, %8.0f median, %5.1f allocs/msg  (rounds %.0f)\n",
					batch, r.name, r.best(), r.median(), allocs[i], r.rates)
			}
			for _, p := range [][2]string{{"settle defaults", "raw ack-each"}, {"settle w=8", "raw ack-each"},
				{"settle w=8", "raw ack-batch"}, {"settle w=8", "asynq c=8"}} {
				if med[p[0]] == 0 || med[p[1]] == 0 {
					continue
				}
				fmt.Printf("batch %-3d %-15s / %-13s %.2f median\n", batch, p[0], p[1], ratio(med[p[0]], med[p[1]]))
			}
			b.ReportMetric(ratio(med["settle w=8"], med["raw ack-each"]), "b"+strconv.Itoa(batch)+"-settle-w8/raw-each")
			b.ReportMetric(ratio(med["settle w=8"], med["asynq c=8"]), "b"+strconv.Itoa(batch)+"-settle-w8/asynq")
		}
	}
}
