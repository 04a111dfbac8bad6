package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rabbitmq/amqp091-go"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// The Watermill benchmarks compare the adapter (Watermill's Publisher and Subscriber over a
// settle backend) with Watermill's own adapter for the same server, through the same Watermill
// interfaces, in one run: PostgreSQL against watermill-sql v4 (its PostgreSQL offsets adapter),
// RabbitMQ against watermill-amqp v3. Each contender publishes N 200-byte messages, one per
// Publish call from 8 goroutines, into a topic of its own, then one Subscriber drains them,
// acknowledging each. Contenders run interleaved, round by round; the figures are each one's
// median round.

// wmN is how many messages each contender publishes and drains (SETTLE_BENCH_WATERMILL_N,
// default 5000).
func wmN(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_WATERMILL_N", "5000"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_WATERMILL_N=%q: want a positive integer", os.Getenv("SETTLE_BENCH_WATERMILL_N"))
	}
	return n
}

// wmRounds is how many interleaved rounds run (SETTLE_BENCH_WATERMILL_ROUNDS, default 3).
func wmRounds(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_WATERMILL_ROUNDS", "3"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_WATERMILL_ROUNDS=%q: want a positive integer", os.Getenv("SETTLE_BENCH_WATERMILL_ROUNDS"))
	}
	return n
}

const wmPublishers = 8

var wmBody = []byte(strings.Repeat("x", 200))

// wmPubSub is one contender's Publisher and Subscriber on a fresh topic, and how to remove
// what it created.
type wmPubSub struct {
	pub     message.Publisher
	subs    []message.Subscriber // several compete for one queue
	cleanup func()
}

// wmContender builds a contender for one round.
type wmContender struct {
	name string
	peer string // the contender its ratios are taken against; "" for a peer
	make func(ctx context.Context, topic string) (*wmPubSub, error)
}

// wmRate is one round of one contender.
type wmRate struct{ publish, drain float64 }

// wmRun publishes n messages to topic from wmPublishers goroutines, then drains them through
// every subscriber of ps at once, acknowledging each, and returns both rates in msgs/s.
func wmRun(ctx context.Context, ps *wmPubSub, topic string, n int) (wmRate, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, wmPublishers)
	for w := range wmPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += wmPublishers {
				if err := ps.pub.Publish(topic, message.NewMessage(watermill.NewUUID(), wmBody)); err != nil {
					errs <- fmt.Errorf("publish %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return wmRate{}, err
	}
	published := time.Since(start)

	start = time.Now()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan struct{}, n)
	for _, sub := range ps.subs {
		msgs, err := sub.Subscribe(subCtx, topic)
		if err != nil {
			return wmRate{}, err
		}
		go func() {
			for m := range msgs {
				m.Ack()
				got <- struct{}{}
			}
		}()
	}
	timeout := time.After(5 * time.Minute)
	for i := range n {
		select {
		case <-got:
		case <-timeout:
			return wmRate{}, fmt.Errorf("drained %d of %d in 5 minutes", i, n)
		}
	}
	drained := time.Since(start)
	return wmRate{publish: float64(n) / published.Seconds(), drain: float64(n) / drained.Seconds()}, nil
}

func wmSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// wmBench runs the contenders interleaved in a balanced order (roundOrder) and prints each
// one's median publish and drain rates, with the ratios to its peer's, and records both per
// contender (backend names the server in the records: "postgres", "rabbitmq", "mariadb").
func wmBench(b *testing.B, env, backend string, contenders []wmContender) {
	ctx := context.Background()
	n, rounds := wmN(b), wmRounds(b)
	rates := make(map[string][]wmRate)
	for range b.N {
		for r := range rounds {
			for _, i := range roundOrder(r, len(contenders)) {
				c := contenders[i]
				if !picked(env, c.name) {
					continue
				}
				topic := "wmbench_" + wmSuffix()
				ps, err := c.make(ctx, topic)
				if err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
				rate, err := wmRun(ctx, ps, topic, n)
				for _, s := range ps.subs {
					_ = s.Close()
				}
				_ = ps.pub.Close()
				ps.cleanup()
				if err != nil {
					b.Fatalf("%s, round %d: %v", c.name, r+1, err)
				}
				rates[c.name] = append(rates[c.name], rate)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\n%s: N=%d, %d interleaved rounds, load average %s", b.Name(), n, rounds, load)
	fmt.Println("| contender | publish msgs/s (min–max) | ÷peer | drain msgs/s (min–max) | ÷peer |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	medians := make(map[string]wmRate)
	for _, c := range contenders {
		rs := rates[c.name]
		if len(rs) == 0 {
			continue
		}
		pub, drain := result{name: c.name}, result{name: c.name}
		for _, r := range rs {
			pub.rates = append(pub.rates, r.publish)
			drain.rates = append(drain.rates, r.drain)
		}
		medians[c.name] = wmRate{publish: pub.median(), drain: drain.median()}
		record(b, Record{Chart: "publish", Backend: backend, Series: c.name, Unit: "msgs/s", Values: pub.rates})
		record(b, Record{Chart: "throughput", Backend: backend, Series: c.name, Unit: "msgs/s", Values: drain.rates})
		peer, ok := medians[c.peer]
		ratio := func(v, p float64) string {
			if !ok || p == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", v/p)
		}
		fmt.Printf("| %s | %.0f (%.0f–%.0f) | %s | %.0f (%.0f–%.0f) | %s |\n", c.name,
			pub.median(), minOf(pub.rates), maxOf(pub.rates), ratio(pub.median(), peer.publish),
			drain.median(), minOf(drain.rates), maxOf(drain.rates), ratio(drain.median(), peer.drain))
		if ok && peer.drain > 0 {
			b.ReportMetric(drain.median()/peer.drain, "drain÷peer("+strings.ReplaceAll(c.name, " ", "_")+")")
		}
	}
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// BenchmarkWatermillPostgres: the adapter on PostgreSQL (lease form, one queue table with a
// group per topic, claims of 100 rows as watermill-sql reads 100 at a time) against watermill-sql v4's PostgreSQL offsets adapter (a table per topic,
// an offsets table per topic, consumer group "bench"), both on pgx pools of the same size on
// the same server. SETTLE_BENCH_WATERMILL_WHO=settle picks contenders by name.
func BenchmarkWatermillPostgres(b *testing.B) {
	url := pgURL()
	pool, err := pgxpool.New(context.Background(), url)
	if err == nil {
		err = pool.Ping(context.Background())
	}
	if err != nil {
		coretest.ServerUnavailable(b, "PostgreSQL", url, err)
	}
	defer pool.Close()
	drop := func(names ...string) {
		for _, t := range names {
			if _, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+t+`"`); err != nil {
				b.Errorf("drop table %s: %v", t, err)
			}
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	settle := func(subs int) func(ctx context.Context, topic string) (*wmPubSub, error) {
		return func(ctx context.Context, topic string) (*wmPubSub, error) {
			db, err := postgres.Open(ctx, url)
			if err != nil {
				return nil, err
			}
			t := sqlqueue.StandardTable(topic)
			t.Columns.ProcessedAt = ""
			topics, err := settlewatermill.SQL(db, t, postgres.Lease, postgres.NewPublisher, settlewatermill.CreateTables())
			if err != nil {
				return nil, err
			}
			pub, err := settlewatermill.NewPublisher(topics)
			if err != nil {
				return nil, err
			}
			ps := &wmPubSub{pub: pub, cleanup: func() { _ = db.Close(); drop(topic) }}
			for range subs {
				// Claims of 100 rows, as watermill-sql's SubscribeBatchSize default.
				sub, err := settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(quiet),
					settlewatermill.Mount(sqlqueue.BatchSize(100)))
				if err != nil {
					return nil, err
				}
				ps.subs = append(ps.subs, sub)
			}
			return ps, nil
		}
	}
	wmBench(b, "SETTLE_BENCH_WATERMILL_WHO", "postgres", []wmContender{
		{"watermill-sql (offsets)", "", func(ctx context.Context, topic string) (*wmPubSub, error) {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				return nil, err
			}
			db := wsql.BeginnerFromPgx(p)
			schema := &wsql.DefaultPostgreSQLSchema{GeneratePayloadType: func(string) string { return "BYTEA" }}
			offsets := wsql.DefaultPostgreSQLOffsetsAdapter{}
			pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, watermill.NopLogger{})
			if err != nil {
				return nil, err
			}
			sub, err := wsql.NewSubscriber(db, wsql.SubscriberConfig{ConsumerGroup: "bench", SchemaAdapter: schema,
				OffsetsAdapter: offsets, InitializeSchema: true}, watermill.NopLogger{})
			if err != nil {
				return nil, err
			}
			return &wmPubSub{pub: pub, subs: []message.Subscriber{sub}, cleanup: func() {
				p.Close()
				drop("watermill_"+topic, "watermill_offsets_"+topic)
			}}, nil
		}},
		{"settlewatermill lease, 1 subscriber", "watermill-sql (offsets)", settle(1)},
		{"settlewatermill lease, 4 subscribers", "watermill-sql (offsets)", settle(4)},
	})
}

// BenchmarkWatermillAMQP: the adapter on RabbitMQ (classic queues, a queue per topic) against
// watermill-amqp v3 (NewDurableQueueConfig: a durable queue per topic), both publishing with
// publisher confirms (watermill-amqp: ConfirmDelivery and a pool of 8 channels) and consuming
// with prefetch 1 and 50.
func BenchmarkWatermillAMQP(b *testing.B) {
	url := amqpURL()
	if c, err := amqp091.Dial(url); err != nil {
		coretest.ServerUnavailable(b, "RabbitMQ", url, err)
	} else {
		_ = c.Close()
	}
	deleteQueue := func(q string) {
		c, err := amqp091.Dial(url)
		if err != nil {
			b.Errorf("delete queue %s: %v", q, err)
			return
		}
		defer c.Close()
		ch, err := c.Channel()
		if err == nil {
			_, err = ch.QueueDelete(q, false, false, false)
		}
		if err != nil {
			b.Errorf("delete queue %s: %v", q, err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	var contenders []wmContender
	for _, prefetch := range []int{1, 50} {
		contenders = append(contenders, wmContender{fmt.Sprintf("watermill-amqp prefetch %d", prefetch), "",
			func(ctx context.Context, topic string) (*wmPubSub, error) {
				cfg := wamqp.NewDurableQueueConfig(url)
				cfg.Publish.ConfirmDelivery = true
				cfg.Publish.ChannelPoolSize = wmPublishers
				cfg.Consume.Qos.PrefetchCount = prefetch
				pub, err := wamqp.NewPublisher(cfg, watermill.NopLogger{})
				if err != nil {
					return nil, err
				}
				sub, err := wamqp.NewSubscriber(cfg, watermill.NopLogger{})
				if err != nil {
					return nil, err
				}
				// Declare the queue before publishing, as the adapter's SubscribeInitialize does.
				if err := sub.SubscribeInitialize(topic); err != nil {
					return nil, err
				}
				return &wmPubSub{pub: pub, subs: []message.Subscriber{sub}, cleanup: func() { deleteQueue(topic) }}, nil
			}})
	}
	for _, prefetch := range []int{1, 50} {
		contenders = append(contenders, wmContender{fmt.Sprintf("settlewatermill classic prefetch %d", prefetch), fmt.Sprintf("watermill-amqp prefetch %d", prefetch),
			func(ctx context.Context, topic string) (*wmPubSub, error) {
				broker, err := amqp.New(amqp.URL(url), amqp.DeclareTopology(true), amqp.WithLogger(quiet))
				if err != nil {
					return nil, err
				}
				if err := broker.Start(ctx); err != nil {
					return nil, err
				}
				topics, err := settlewatermill.AMQP(broker, settlewatermill.Classic(amqp.Prefetch(prefetch)))
				if err != nil {
					return nil, err
				}
				pub, err := settlewatermill.NewPublisher(topics)
				if err != nil {
					return nil, err
				}
				sub, err := settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(quiet))
				if err != nil {
					return nil, err
				}
				if err := sub.SubscribeInitialize(topic); err != nil {
					return nil, err
				}
				return &wmPubSub{pub: pub, subs: []message.Subscriber{sub}, cleanup: func() {
					_ = broker.Close()
					deleteQueue(topic)
				}}, nil
			}})
	}
	wmBench(b, "SETTLE_BENCH_WATERMILL_WHO", "rabbitmq", contenders)
}
