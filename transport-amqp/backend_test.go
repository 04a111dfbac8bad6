package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/transporttest"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// url is the RabbitMQ the tests run against.
var url = coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")

// urlParts reads url as the client does: its host:port and its virtual host ("/" when the URL
// names none). A URL that does not parse fails the test.
func urlParts(t testing.TB) (hostPort, vhost string) {
	t.Helper()
	u, err := amqp091.ParseURI(url)
	if err != nil {
		t.Fatalf("SETTLE_TEST_AMQP_URL %q: %v", url, err)
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), u.Vhost
}

// urlVia is url with its host:port replaced by 127.0.0.1:port (a proxy of the test's own),
// with the same credentials and virtual host.
func urlVia(t testing.TB, port int) string {
	t.Helper()
	u, err := amqp091.ParseURI(url)
	if err != nil {
		t.Fatalf("SETTLE_TEST_AMQP_URL %q: %v", url, err)
	}
	u.Host, u.Port = "127.0.0.1", port
	return u.String()
}

// realServer returns a DialFunc for the real RabbitMQ, or skips (fails under
// SETTLE_REQUIRE_SERVERS=1) when it cannot be reached.
func realServer(t testing.TB) amqp.DialFunc {
	t.Helper()
	dial := amqp.URL(url)
	c, err := dial()
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", url+" (SETTLE_TEST_AMQP_URL)", err)
	}
	_ = c.Close()
	return dial
}

func testLogger() *slog.Logger {
	if os.Getenv("SETTLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// queueKind builds a descriptor of one kind for a test.
type queueKind struct {
	name   string
	quorum bool
}

var kinds = []queueKind{{"classic", false}, {"quorum", true}}

// backend is a transporttest.Backend on one RabbitMQ (real or in-process): logical queue names
// get a unique prefix per test, and the queues are deleted when the test ends.
type backend struct {
	t      testing.TB
	dial   amqp.DialFunc
	prefix string
	quorum bool
	clock  clock.Clock
	opts   []amqp.QueueOption

	adminMu sync.Mutex
	admin   amqp.Connection

	mu     sync.Mutex
	broker *amqp.Broker
	caps   map[string]int // queue → the cap of the subscription opened on it
	queues map[string]bool
	opened map[string]chan struct{} // closed once the latest endpoint on the queue has opened
}

func newBackend(t testing.TB, dial amqp.DialFunc, c clock.Clock, quorum bool, opts ...amqp.QueueOption) *backend {
	t.Helper()
	admin, err := dial()
	if err != nil {
		t.Fatalf("admin connection: %v", err)
	}
	b := &backend{t: t, dial: dial, prefix: "settle-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
		quorum: quorum, clock: c, opts: opts, admin: admin, caps: map[string]int{}, queues: map[string]bool{}, opened: map[string]chan struct{}{}}
	t.Cleanup(func() {
		admin := b.conn()
		ch, err := admin.Channel()
		if err == nil {
			b.mu.Lock()
			for q := range b.queues {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			b.mu.Unlock()
			_ = ch.Close()
		}
		_ = admin.Close()
	})
	return b
}

// conn returns the admin connection, dialling again after a test killed it.
func (b *backend) conn() amqp.Connection {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.admin.IsClosed() {
		c, err := b.dial()
		if err != nil {
			b.t.Errorf("admin connection: %v", err)
			return b.admin
		}
		b.admin = c
	}
	return b.admin
}

func (b *backend) name(queue string) string {
	n := b.prefix + queue
	b.mu.Lock()
	b.queues[n] = true
	b.mu.Unlock()
	return n
}

// Register gives app a Broker of its own that declares topology.
func (b *backend) Register(app *core.App) {
	br, err := amqp.New(b.dial, amqp.DeclareTopology(true), amqp.WithLogger(app.Logger()), amqp.WithClock(app.Clock()),
		amqp.ReconnectBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		b.t.Fatalf("amqp.New: %v", err)
	}
	app.Register(br)
	b.mu.Lock()
	b.broker = br
	b.mu.Unlock()
}

func (b *backend) Endpoint(queue string) core.Endpoint {
	b.mu.Lock()
	br := b.broker
	b.mu.Unlock()
	n := b.name(queue)
	var ep core.Endpoint
	var err error
	if b.quorum {
		opts := make([]amqp.QuorumOption, len(b.opts))
		for i, o := range b.opts {
			opts[i] = o
		}
		ep, err = amqp.Quorum(br, n, opts...)
	} else {
		opts := make([]amqp.ClassicOption, len(b.opts))
		for i, o := range b.opts {
			opts[i] = o
		}
		ep, err = amqp.Classic(br, n, opts...)
	}
	if err != nil {
		b.t.Fatalf("endpoint %q: %v", queue, err)
	}
	opened := make(chan struct{})
	b.mu.Lock()
	b.opened[n] = opened
	b.mu.Unlock()
	return capture{ep, b, opened}
}

// capture records the cap a subscription opens its queue with, prefixes its dead letter, and
// tells Publish when the queue is declared.
type capture struct {
	core.Endpoint
	b      *backend
	opened chan struct{}
}

func (c capture) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	if sub.Options.Cap > 0 && !c.b.isPrefixed(sub.Options.DeadLetterTo) {
		// The options are the subscription's own: core reads the destination from them too.
		sub.Options.DeadLetterTo = c.b.name(sub.Options.DeadLetterTo)
	}
	c.b.mu.Lock()
	c.b.caps[c.Queue()] = sub.Options.Cap
	c.b.mu.Unlock()
	src, fin, err := c.Endpoint.Open(ctx, sub)
	if err == nil {
		close(c.opened)
	}
	return src, fin, err
}

func (b *backend) isPrefixed(q string) bool {
	return len(q) > len(b.prefix) && q[:len(b.prefix)] == b.prefix
}

// Publish waits until the subscription on queue (if there is one) has declared it: on RabbitMQ
// a message published to a queue that does not exist yet is dropped.
func (b *backend) Publish(ctx context.Context, queue string, body []byte, headers map[string]string) error {
	n := b.name(queue)
	b.mu.Lock()
	opened := b.opened[n]
	b.mu.Unlock()
	if opened != nil {
		select {
		case <-opened:
		case <-ctx.Done():
			return fmt.Errorf("queue %q was never opened: %w", n, ctx.Err())
		}
	}
	ch, err := b.conn().Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	var h amqp091.Table
	if len(headers) > 0 {
		h = amqp091.Table{}
		for k, v := range headers {
			h[k] = v
		}
	}
	return ch.PublishWithContext(ctx, "", b.name(queue), false, false, amqp091.Publishing{
		Body: body, Headers: h, DeliveryMode: amqp091.Persistent,
		MessageId: queue + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
	})
}

// Drain takes the queue's ready messages; with atLeast it consumes until that many arrived.
func (b *backend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	got, err := drainRaw(ctx, b.conn(), b.name(queue), atLeast)
	if err != nil {
		return nil, err
	}
	out := make([]transporttest.Message, len(got))
	for i, m := range got {
		out[i] = transporttest.Message{Body: m.Body, Headers: stringHeaders(m.Headers), Count: b.count(m.Headers)}
	}
	return out, nil
}

// count is the final count a dead letter records: settle-retry-count on a copy settle moved;
// for a quorum queue's own move at its delivery limit (x-death reason delivery_limit, which
// carries no count of deliveries), the count before the last copy plus the cap.
func (b *backend) count(h amqp091.Table) int {
	n, _ := strconv.Atoi(headerStr(h[amqp.RetryCountHeader]))
	if reason, queue := death(h); reason == "delivery_limit" {
		b.mu.Lock()
		defer b.mu.Unlock()
		return n + b.caps[queue]
	}
	return n
}

// death returns the reason and queue of the first x-death entry.
func death(h amqp091.Table) (reason, queue string) {
	deaths, _ := h["x-death"].([]any)
	if len(deaths) == 0 {
		return "", ""
	}
	d, _ := deaths[0].(amqp091.Table)
	r, _ := d["reason"].(string)
	q, _ := d["queue"].(string)
	return r, q
}

func headerStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func stringHeaders(h amqp091.Table) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range h {
		if s := headerStr(v); s != "" {
			out[k] = s
		}
	}
	return out
}

// drainRaw removes and returns what queue holds; with atLeast > 0 it first waits (until ctx
// ends) for that many by consuming, then takes what else is ready. A missing queue holds nothing.
func drainRaw(ctx context.Context, conn amqp.Connection, queue string, atLeast int) ([]amqp091.Delivery, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
		var ae *amqp091.Error
		if errors.As(err, &ae) && ae.Code == amqp091.NotFound && atLeast == 0 {
			return nil, nil
		}
		return nil, err
	}
	var out []amqp091.Delivery
	if atLeast > 0 {
		dl, err := ch.Consume(queue, "drain", false, false, false, false, nil)
		if err != nil {
			return nil, err
		}
		for len(out) < atLeast {
			select {
			case m, ok := <-dl:
				if !ok {
					return out, errors.New("drain: consumer closed")
				}
				out = append(out, m)
				if err := ch.Ack(m.DeliveryTag, false); err != nil {
					return out, err
				}
			case <-ctx.Done():
				return out, ctx.Err()
			}
		}
		if err := ch.Cancel("drain", false); err != nil {
			return out, err
		}
		for m := range dl {
			out = append(out, m)
			if err := ch.Ack(m.DeliveryTag, false); err != nil {
				return out, err
			}
		}
	}
	for {
		m, ok, err := ch.Get(queue, false)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, m)
		if err := ch.Ack(m.DeliveryTag, false); err != nil {
			return out, err
		}
	}
}

func TestConformanceRabbitMQ(t *testing.T) {
	dial := realServer(t)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			transporttest.Run(t, func(t *testing.T) transporttest.Env {
				c := clock.Real()
				return transporttest.Env{
					Backend:  newBackend(t, dial, c, k.quorum),
					Features: transporttest.Features{CountsAtTake: k.quorum},
					Clock:    c,
				}
			})
		})
	}
}

func TestConformanceInProcess(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			transporttest.Run(t, func(t *testing.T) transporttest.Env {
				v := clock.NewVirtual(coretest.Epoch)
				srv := amqptest.NewBroker(v)
				return transporttest.Env{
					Backend:  newBackend(t, srv.Dial, v, k.quorum),
					Features: transporttest.Features{CountsAtTake: k.quorum},
					Clock:    v,
					Virtual:  v,
				}
			})
		})
	}
}
