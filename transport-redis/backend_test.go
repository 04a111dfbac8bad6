package redisq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/transporttest"
	redisq "github.com/settlehq/settle/transport-redis"
)

// backend is transporttest's view of one test's streams on a Redis server: every key under a
// prefix of its own.
type backend struct {
	t      testing.TB
	url    string
	prefix string
	admin  redis.UniversalClient
	opts   []redisq.QueueOption
	copts  []redisq.Option // the Client's options (Cluster)

	mu     sync.Mutex
	client *redisq.Client
}

var (
	_ transporttest.DeadLetterNamer = (*backend)(nil)
	_ transporttest.Targeter        = (*backend)(nil)
)

func newBackend(t testing.TB, url string, opts ...redisq.QueueOption) *backend {
	prefix := uniquePrefix()
	return &backend{t: t, url: url, prefix: prefix, admin: newAdmin(t, url, prefix), opts: opts}
}

func (b *backend) key(queue string) string { return b.prefix + queue }

// DeadLetterName is the dead-letter stream's key for a logical queue name.
func (b *backend) DeadLetterName(queue string) string { return b.key(queue) }

// Register gives app a Client of its own.
func (b *backend) Register(app *core.App) {
	c, err := redisq.Open(b.url, append([]redisq.Option{redisq.WithLogger(app.Logger()), redisq.WithClock(app.Clock())}, b.copts...)...)
	if err != nil {
		b.t.Fatalf("redisq.Open: %v", err)
	}
	app.Register(c)
	b.mu.Lock()
	b.client = c
	b.mu.Unlock()
}

func (b *backend) Endpoint(queue string) core.Endpoint {
	b.mu.Lock()
	c := b.client
	b.mu.Unlock()
	q, err := redisq.NewQueue(c, b.key(queue), b.opts...)
	if err != nil {
		b.t.Fatalf("endpoint %q: %v", queue, err)
	}
	return q
}

// Target is the queue's endpoint, which is also its publish target.
func (b *backend) Target(queue string) core.Target { return b.Endpoint(queue).(*redisq.Queue) }

func (b *backend) Publish(ctx context.Context, queue string, body []byte, headers map[string]string) error {
	_, err := publishRaw(ctx, b.url, b.key(queue), body, headers, b.copts...)
	return err
}

// Drain removes and returns the entries the stream holds; with atLeast > 0 it waits (XREAD
// BLOCK on the stream) until that many have come.
func (b *backend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	return drainStream(ctx, b.admin, b.key(queue), atLeast)
}

func drainStream(ctx context.Context, rdb redis.UniversalClient, key string, atLeast int) ([]transporttest.Message, error) {
	var out []transporttest.Message
	last := "0-0"
	for {
		entries, err := rdb.XRangeN(ctx, key, "("+last, "+", 1000).Result()
		if last == "0-0" {
			entries, err = rdb.XRangeN(ctx, key, "-", "+", 1000).Result()
		}
		if err != nil {
			return out, err
		}
		for _, e := range entries {
			if err := rdb.XDel(ctx, key, e.ID).Err(); err != nil {
				return out, err
			}
			out = append(out, message(e))
			last = e.ID
		}
		if len(out) >= atLeast {
			return out, nil
		}
		err = rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Count: 1, Block: 100 * time.Millisecond}).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, err
		}
	}
}

func message(e redis.XMessage) transporttest.Message {
	h := map[string]string{}
	var body []byte
	for k, v := range e.Values {
		s, _ := v.(string)
		if k == redisq.BodyField {
			body = []byte(s)
			continue
		}
		h[k] = s
	}
	n, _ := core.ParseCount(h[core.HeaderRetryCount])
	return transporttest.Message{Body: body, Headers: h, Count: n}
}

func TestTransport(t *testing.T) {
	url := realServer(t)
	transporttest.Run(t, func(t *testing.T) transporttest.Env {
		return transporttest.Env{Backend: newBackend(t, url), Clock: clock.Real(),
			Features: transporttest.Features{CountsAtTake: true, Publish: publishFeatures}}
	})
}

// publishFeatures is what a stream does with core's publish options.
var publishFeatures = transporttest.PublishFeatures{
	MessageID:     transporttest.Supported,
	Headers:       transporttest.Supported,
	CorrelationID: transporttest.Supported,
	OrderingKey:   transporttest.Supported,
	NotBefore:     transporttest.Supported,
	Dedup:         transporttest.Supported,
	Priority:      transporttest.Refused,
	Replies:       transporttest.Supported,
}
