//go:build cgo

package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
	amqp "github.com/settlehq/settle/transport-amqp"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// BenchmarkLatency measures publish→handler latency, p50 and p99, on SQLite, MariaDB, RabbitMQ
// and NATS JetStream (PostgreSQL has BenchmarkPostgresLatency), under two loads, following
// BenchmarkPostgresLatency's method: each message carries, in its payload (stamp), the time its
// publish started, and the handler takes the time since. The payload is used rather than the
// delivery's core.Enqueued time, the same way on every backend: an AMQP message's timestamp
// property has whole seconds only.
//
//   - low load: one message at a time, after a random pause (up to the poll interval where the
//     subscriber polls, up to 20 ms otherwise, so that publishes land at every phase of a poll),
//     waiting for each to reach the handler; one warm-up message first, not counted.
//   - saturating: P publishers (SETTLE_BENCH_LATENCY_PUBLISHERS, default 4) publish N messages
//     back to back, each publish waiting for its durability (the commit, the broker's confirm,
//     JetStream's ack), while the service drains; every message's latency counts. The table
//     also gives the publish and handling rates, which tell whether the queue grew (the
//     publishers outran the service) or not.
//
// How the subscriber learns of a new message:
//
//   - sqlite (dialect-sqlite, synchronous=FULL, lease): the publisher is a sqlite.NewPublisher on
//     the subscriber's own DB, so its publish wakes the claimant in process (SQLite has no
//     cross-process notification; another process's rows wait for the poll).
//   - mariadb (dialect-mysql, lease): the publisher runs on a second DB (a second pool, as
//     another process would), which the in-process wake-up does not reach: the claimant polls,
//     every SETTLE_BENCH_LATENCY_POLL (default 100ms; the engine's default is 1s).
//   - rabbitmq: a classic durable queue; amqp.Publish with WithConfirm from a second Broker;
//     RabbitMQ pushes deliveries to the consumer.
//   - nats: a file-stored work-queue stream; natsjs.Publish from a second Conn; the subscriber's
//     pull request waits on the server, which answers it when a message arrives.
//
// The subscription runs SETTLE_BENCH_LATENCY_WORKERS workers (default 4) and otherwise its
// defaults. Every round uses a fresh file, database, queue or stream.
//
//	SETTLE_BENCH_LATENCY_ONLY=sqlite,nats go test -run '^$' -bench 'BenchmarkLatency$' -benchtime 1x ./bench
//
// SETTLE_BENCH_LATENCY_M low-load messages (default 100), SETTLE_BENCH_LATENCY_N saturating
// messages (default 10000), SETTLE_BENCH_LATENCY_ROUNDS (default 3), SETTLE_BENCH_LATENCY_ONLY
// backends (sqlite, mariadb, rabbitmq, nats; comma-separated fragments).
func BenchmarkLatency(b *testing.B) {
	m := envInt(b, "SETTLE_BENCH_LATENCY_M", 100)
	n := envInt(b, "SETTLE_BENCH_LATENCY_N", 10000)
	rounds := envInt(b, "SETTLE_BENCH_LATENCY_ROUNDS", 3)
	pubs := envInt(b, "SETTLE_BENCH_LATENCY_PUBLISHERS", 4)
	workers := envInt(b, "SETTLE_BENCH_LATENCY_WORKERS", 4)
	poll, err := time.ParseDuration(coretest.Env("SETTLE_BENCH_LATENCY_POLL", "100ms"))
	if err != nil || poll <= 0 {
		b.Fatalf("SETTLE_BENCH_LATENCY_POLL: want a positive duration: %v", err)
	}
	backends := []latBackend{sqliteLatency(), mariadbLatency(poll), amqpLatency(), natsLatency()}
	for range b.N {
		var sb strings.Builder
		fmt.Fprintf(&sb, "\npublish→handler latency: low load %d messages one at a time, saturating %d messages from %d publishers; %d workers; %d rounds, load average %.1f\n\n",
			m, n, pubs, workers, rounds, loadAverage())
		fmt.Fprintln(&sb, "| backend | load | p50 ms (min–max) | p99 ms (min–max) | published msgs/s | handled msgs/s |")
		fmt.Fprintln(&sb, "| --- | --- | ---: | ---: | ---: | ---: |")
		for _, be := range backends {
			if !picked("SETTLE_BENCH_LATENCY_ONLY", be.name) {
				continue
			}
			if err := be.probe(); err != nil {
				if coretest.RequireServers() {
					b.Fatalf("latency %s: server required (SETTLE_REQUIRE_SERVERS=1) but unreachable: %v", be.name, err)
				}
				fmt.Fprintf(&sb, "| %s | skipped: server unreachable: %v | | | | |\n", be.name, err)
				continue
			}
			var low, sat latRounds
			for range rounds {
				func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
					defer cancel()
					var got latSink
					rig, err := be.setup(ctx, b, workers, got.handle)
					if err != nil {
						b.Fatalf("latency %s: %v", be.name, err)
					}
					defer rig.close()
					low.add(latLow(ctx, b, be, rig, &got, m))
					sat.add(latSaturating(ctx, b, be, rig, &got, n, pubs))
				}()
			}
			for _, r := range []struct {
				series string
				lr     *latRounds
			}{{"low load", &low}, {"saturating", &sat}} {
				fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", be.name, r.series, msSpread(r.lr.p50), msSpread(r.lr.p99),
					rateOrDash(r.lr.pub), rateOrDash(r.lr.handled))
				record(b, Record{Chart: "latency", Backend: be.name, Series: r.series, XName: "percentile", X: 50, Unit: "ms", Values: r.lr.p50})
				record(b, Record{Chart: "latency", Backend: be.name, Series: r.series, XName: "percentile", X: 99, Unit: "ms", Values: r.lr.p99})
				b.ReportMetric(med(r.lr.p50), metricName(be.name+" "+r.series)+"-p50-ms")
				b.ReportMetric(med(r.lr.p99), metricName(be.name+" "+r.series)+"-p99-ms")
			}
		}
		fmt.Print(sb.String()) // b.Log would cut the table at ten lines
	}
}

// latBackend is one backend of BenchmarkLatency.
type latBackend struct {
	name  string
	gap   time.Duration // the low-load pause is random in [0, gap)
	probe func() error
	// setup starts an App with one subscription of workers calling handle with each message's
	// latency, and returns how to publish to it; rig.close stops the App and removes the queue.
	setup func(ctx context.Context, b *testing.B, workers int, handle func(time.Duration)) (latRig, error)
}

type latRig struct {
	publish func(ctx context.Context, s stamp) error
	close   func()
}

// latSink receives the handler's latencies: one at a time (low load) or all of a flood.
type latSink struct {
	mu     sync.Mutex
	one    chan time.Duration // low load: each latency in turn
	all    []time.Duration    // saturating: every latency
	want   int                // saturating: how many make all
	filled chan struct{}      // closed when all has want latencies
}

func (s *latSink) handle(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.one != nil {
		select {
		case s.one <- d:
		default: // not waited for (a redelivery): the low-load loop takes one at a time
		}
		return
	}
	if s.filled != nil && len(s.all) < s.want {
		s.all = append(s.all, d)
		if len(s.all) == s.want {
			close(s.filled)
		}
	}
}

// latRounds is one backend's and load's figures, one per round.
type latRounds struct{ p50, p99, pub, handled []float64 }

type latRound struct{ p50, p99, pub, handled float64 }

func (r *latRounds) add(x latRound) {
	r.p50, r.p99 = append(r.p50, x.p50), append(r.p99, x.p99)
	if x.pub > 0 {
		r.pub, r.handled = append(r.pub, x.pub), append(r.handled, x.handled)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msSpread(xs []float64) string {
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med(xs), slices.Min(xs), slices.Max(xs))
}

func rateOrDash(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	return spread(xs)
}

// latLow publishes m messages one at a time after one warm-up, each after a random pause, and
// waits for each to reach the handler.
func latLow(ctx context.Context, b *testing.B, be latBackend, rig latRig, got *latSink, m int) latRound {
	one := make(chan time.Duration, 1)
	got.mu.Lock()
	got.one = one
	got.mu.Unlock()
	defer func() {
		got.mu.Lock()
		got.one = nil
		got.mu.Unlock()
	}()
	rng := mrand.New(mrand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, m)
	for i := range m + 1 {
		// Pacing the publisher is the workload (a random gap before each publish), not a wait
		// for an effect.
		<-time.After(time.Duration(rng.Int64N(int64(be.gap))))
		if err := rig.publish(ctx, stamp{Sent: time.Now().UnixNano()}); err != nil {
			b.Fatalf("latency %s: publish: %v", be.name, err)
		}
		select {
		case d := <-one:
			if i > 0 { // the first opens connections and prepares statements
				lat = append(lat, d)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("latency %s: a message did not arrive within 30 s", be.name)
		}
	}
	return latRound{p50: ms(percentile(lat, 0.50)), p99: ms(percentile(lat, 0.99))}
}

// latSaturating floods the queue with n messages from pubs publishers and collects every
// message's latency.
func latSaturating(ctx context.Context, b *testing.B, be latBackend, rig latRig, got *latSink, n, pubs int) latRound {
	filled := make(chan struct{})
	got.mu.Lock()
	got.all, got.want, got.filled = make([]time.Duration, 0, n), n, filled
	got.mu.Unlock()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pubs)
	start := time.Now()
	for range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := rig.publish(ctx, stamp{Sent: time.Now().UnixNano()}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	published := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("latency %s: publish: %v", be.name, err)
	}
	select {
	case <-filled:
	case <-time.After(10 * time.Minute):
		got.mu.Lock()
		k := len(got.all)
		got.mu.Unlock()
		b.Fatalf("latency %s: %d of %d messages handled within 10 min of the last publish", be.name, k, n)
	}
	handled := time.Since(start)
	got.mu.Lock()
	lat := got.all
	got.all, got.filled = nil, nil
	got.mu.Unlock()
	return latRound{p50: ms(percentile(lat, 0.50)), p99: ms(percentile(lat, 0.99)),
		pub: float64(n) / published.Seconds(), handled: float64(n) / handled.Seconds()}
}

// startLatApp runs app until the returned stop is called.
func startLatApp(ctx context.Context, b *testing.B, app *core.App) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

func latApp(b *testing.B) *core.App {
	return core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(s core.Settlement) {
			if s.Err != nil {
				b.Errorf("settlement failed: %v", s.Err)
			}
		}))
}

func latHandler(handle func(time.Duration)) core.Handler[stamp] {
	return func(_ context.Context, m *core.Message[stamp]) error {
		handle(time.Since(time.Unix(0, m.Payload.Sent)))
		return nil
	}
}

func sqliteLatency() latBackend {
	return latBackend{name: "sqlite", gap: 20 * time.Millisecond, probe: func() error { return nil },
		setup: func(ctx context.Context, b *testing.B, workers int, handle func(time.Duration)) (latRig, error) {
			db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "latency.db"))
			if err != nil {
				return latRig{}, err
			}
			t := sqlqueue.StandardTable("q")
			t.Columns.ProcessedAt = "" // ack deletes
			if err := db.CreateTable(ctx, t); err != nil {
				return latRig{}, err
			}
			app := latApp(b)
			app.Register(db) // closed when the App stops
			ep, err := sqlite.Lease(db, t, "q")
			if err != nil {
				return latRig{}, err
			}
			if err := core.Subscribe(app, ep, latHandler(handle), core.Workers(workers)); err != nil {
				return latRig{}, err
			}
			pub, err := sqlite.NewPublisher(db, t, "q") // same DB: the publish wakes the claimant
			if err != nil {
				return latRig{}, err
			}
			stop := startLatApp(ctx, b, app)
			return latRig{
				publish: func(ctx context.Context, s stamp) error { _, err := sqlqueue.Publish(ctx, pub, s); return err },
				close:   stop,
			}, nil
		}}
}

func mariadbLatency(poll time.Duration) latBackend {
	return latBackend{name: "mariadb", gap: poll,
		probe: func() error {
			admin, err := sql.Open("mysql", myURL())
			if err != nil {
				return err
			}
			defer admin.Close()
			return admin.Ping()
		},
		setup: func(ctx context.Context, b *testing.B, workers int, handle func(time.Duration)) (latRig, error) {
			cfg, err := gomysql.ParseDSN(myURL())
			if err != nil {
				return latRig{}, err
			}
			admin, err := sql.Open("mysql", myURL())
			if err != nil {
				return latRig{}, err
			}
			var rnd [4]byte
			_, _ = rand.Read(rnd[:])
			name := "settle_latency_" + hex.EncodeToString(rnd[:])
			if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
				_ = admin.Close()
				return latRig{}, err
			}
			drop := func() {
				_, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+name)
				_ = admin.Close()
			}
			dcfg := cfg.Clone()
			dcfg.DBName = name
			sub, err := mysql.Open(ctx, dcfg.FormatDSN())
			if err != nil {
				drop()
				return latRig{}, err
			}
			if _, err := sub.Pool().ExecContext(ctx, myBenchDDL); err != nil {
				_ = sub.Close()
				drop()
				return latRig{}, err
			}
			// A second DB, as another process: the subscriber's in-process wake-up does not reach it.
			other, err := mysql.Open(ctx, dcfg.FormatDSN())
			if err != nil {
				_ = sub.Close()
				drop()
				return latRig{}, err
			}
			pub, err := mysql.NewPublisher(other, myQueueTable(), "")
			if err != nil {
				return latRig{}, err
			}
			app := latApp(b)
			app.Register(sub)
			ep, err := mysql.Lease(sub, myQueueTable(), "")
			if err != nil {
				return latRig{}, err
			}
			if err := core.Subscribe(app, ep, latHandler(handle), core.Workers(workers), sqlqueue.PollInterval(poll)); err != nil {
				return latRig{}, err
			}
			stop := startLatApp(ctx, b, app)
			return latRig{
				publish: func(ctx context.Context, s stamp) error { _, err := sqlqueue.Publish(ctx, pub, s); return err },
				close: func() {
					stop()
					_ = other.Close()
					drop()
				},
			}, nil
		}}
}

func amqpLatency() latBackend {
	return latBackend{name: "rabbitmq", gap: 20 * time.Millisecond,
		probe: func() error {
			c, err := amqp091.Dial(amqpURL())
			if err != nil {
				return err
			}
			return c.Close()
		},
		setup: func(ctx context.Context, b *testing.B, workers int, handle func(time.Duration)) (latRig, error) {
			var rnd [4]byte
			_, _ = rand.Read(rnd[:])
			q := "settle-latency-" + hex.EncodeToString(rnd[:])
			if err := seedAMQP(q, false, 0); err != nil { // declares the durable queue
				return latRig{}, err
			}
			log := slog.New(slog.DiscardHandler)
			sub, err := amqp.New(amqp.URL(amqpURL()), amqp.WithLogger(log))
			if err != nil {
				deleteAMQP(q)
				return latRig{}, err
			}
			app := latApp(b)
			app.Register(sub)
			ep, err := amqp.Classic(sub, q)
			if err != nil {
				deleteAMQP(q)
				return latRig{}, err
			}
			if err := core.Subscribe(app, ep, latHandler(handle), core.Workers(workers)); err != nil {
				deleteAMQP(q)
				return latRig{}, err
			}
			pub, err := amqp.New(amqp.URL(amqpURL()), amqp.WithLogger(log))
			if err != nil {
				deleteAMQP(q)
				return latRig{}, err
			}
			stop := startLatApp(ctx, b, app)
			return latRig{
				publish: func(ctx context.Context, s stamp) error {
					return amqp.Publish(ctx, pub, "", q, s, amqp.WithConfirm())
				},
				close: func() {
					stop()
					_ = pub.Close()
					deleteAMQP(q)
				},
			}, nil
		}}
}

func natsLatency() latBackend {
	return latBackend{name: "nats", gap: 20 * time.Millisecond,
		probe: func() error {
			nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.MaxReconnects(0))
			if err != nil {
				return err
			}
			nc.Close()
			return nil
		},
		setup: func(ctx context.Context, b *testing.B, workers int, handle func(time.Duration)) (latRig, error) {
			nc, err := nats.Connect(natsURL())
			if err != nil {
				return latRig{}, err
			}
			js, err := jetstream.New(nc)
			if err != nil {
				nc.Close()
				return latRig{}, err
			}
			var rnd [4]byte
			_, _ = rand.Read(rnd[:])
			stream := "settle_latency_" + hex.EncodeToString(rnd[:])
			subject := strings.ReplaceAll(stream, "_", ".")
			drop := func() {
				_ = js.DeleteStream(context.Background(), stream)
				nc.Close()
			}
			// The stream (file storage, work queue) and its durable consumer, with no message.
			if err := seedNATS(ctx, js, stream, subject, jetstream.AckExplicitPolicy, 0); err != nil {
				drop()
				return latRig{}, err
			}
			log := slog.New(slog.DiscardHandler)
			sub, err := natsjs.New(natsURL(), natsjs.WithLogger(log))
			if err != nil {
				drop()
				return latRig{}, err
			}
			app := latApp(b)
			app.Register(sub)
			q, err := natsjs.NewQueue(sub, subject, natsjs.Stream(stream), natsjs.Durable(stream))
			if err != nil {
				drop()
				return latRig{}, err
			}
			if err := core.Subscribe(app, q, latHandler(handle), core.Workers(workers)); err != nil {
				drop()
				return latRig{}, err
			}
			pub, err := natsjs.New(natsURL(), natsjs.WithLogger(log))
			if err != nil {
				drop()
				return latRig{}, err
			}
			stop := startLatApp(ctx, b, app)
			return latRig{
				publish: func(ctx context.Context, s stamp) error { _, err := natsjs.Publish(ctx, pub, subject, s); return err },
				close: func() {
					stop()
					_ = pub.Close()
					drop()
				},
			}, nil
		}}
}
