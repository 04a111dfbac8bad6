package amqptest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core/clock"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// wait bounds every wait for an event; events normally arrive at once.
const wait = 10 * time.Second

// env is one broker a behaviour runs on: amqptest on a virtual clock, or the real RabbitMQ.
type env struct {
	t      *testing.T
	conn   amqp.Connection
	clk    *clock.Virtual   // nil on the real server
	broker *amqptest.Broker // nil on the real server
	prefix string           // unique per test
	vhost  string           // the virtual host the broker's error texts name
	queues map[string]bool  // deleted after the test
	exchs  map[string]bool  // deleted after the test
}

// parity runs f on amqptest and on the real RabbitMQ.
func parity(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	t.Run("amqptest", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		b := amqptest.NewBroker(clk)
		conn, err := b.Dial()
		if err != nil {
			t.Fatal(err)
		}
		f(t, newEnv(t, conn, clk, b, "/"))
	})
	t.Run("rabbitmq", func(t *testing.T) {
		t.Parallel()
		conn, vhost := dialReal(t)
		f(t, newEnv(t, conn, nil, nil, vhost))
	})
}

// dialReal connects to the real RabbitMQ (SETTLE_TEST_AMQP_URL) and returns the connection and
// the URL's virtual host, or skips (fails under SETTLE_REQUIRE_SERVERS=1) when it cannot.
func dialReal(t *testing.T) (amqp.Connection, string) {
	t.Helper()
	url := os.Getenv("SETTLE_TEST_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	uri, err := amqp091.ParseURI(url)
	if err != nil {
		t.Fatalf("SETTLE_TEST_AMQP_URL %q: %v", url, err)
	}
	conn, err := amqp.Dial(url, amqp091.Config{Dial: amqp091.DefaultDial(3 * time.Second)})
	if err != nil {
		if os.Getenv("SETTLE_REQUIRE_SERVERS") == "1" {
			t.Fatalf("RabbitMQ at %s is required (SETTLE_REQUIRE_SERVERS=1): %v", url, err)
		}
		t.Skipf("RabbitMQ at %s is unreachable (set SETTLE_TEST_AMQP_URL): %v", url, err)
	}
	return conn, uri.Vhost
}

func newEnv(t *testing.T, conn amqp.Connection, clk *clock.Virtual, b *amqptest.Broker, vhost string) *env {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	e := &env{t: t, conn: conn, clk: clk, broker: b, prefix: "settle-test." + name + "." + hex.EncodeToString(r[:]),
		vhost: vhost, queues: map[string]bool{}, exchs: map[string]bool{}}
	t.Cleanup(func() {
		if conn.IsClosed() {
			return
		}
		if ch, err := conn.Channel(); err == nil {
			for q := range e.queues {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			for x := range e.exchs {
				_ = ch.ExchangeDelete(x, false, false)
			}
		}
		_ = conn.Close()
	})
	return e
}

// q names a queue for this test and schedules its deletion.
func (e *env) q(name string) string {
	n := e.prefix + "." + name
	e.queues[n] = true
	return n
}

// x names an exchange for this test and schedules its deletion.
func (e *env) x(name string) string {
	n := e.prefix + ".x." + name
	e.exchs[n] = true
	return n
}

// advance moves the virtual clock; on the real server time passes by itself and the test
// waits for the event instead.
func (e *env) advance(d time.Duration) {
	if e.clk != nil {
		e.clk.Advance(d)
	}
}

func (e *env) ch() amqp.Channel {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	return ch
}

func (e *env) declare(ch amqp.Channel, name string, args amqp091.Table) {
	e.t.Helper()
	durable := args["x-queue-type"] == "quorum"
	if _, err := ch.QueueDeclare(name, durable, false, false, false, args); err != nil {
		e.t.Fatalf("declare %s: %v", name, err)
	}
}

// publish publishes with a confirmation, so that the message is in its queues on return.
func (e *env) publish(exchange, key string, p amqp091.Publishing) {
	e.t.Helper()
	ch := e.ch()
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		e.t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, p)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		e.t.Fatalf("publish to %q/%q not confirmed: %v", exchange, key, err)
	}
}

func (e *env) consume(ch amqp.Channel, queue string) <-chan amqp091.Delivery {
	e.t.Helper()
	d, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		e.t.Fatalf("consume %s: %v", queue, err)
	}
	return d
}

func recv(t *testing.T, c <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-c:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return d
	case <-time.After(wait):
		t.Fatal("no delivery within", wait)
	}
	return amqp091.Delivery{}
}

func closeErr(t *testing.T, c chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case err := <-c:
		if err == nil {
			t.Fatal("channel closed without an error")
		}
		return err
	case <-time.After(wait):
		t.Fatal("channel not closed within", wait)
	}
	return nil
}

// ready reads a queue's ready count with a passive declaration, as a client would.
func (e *env) ready(queue string) int {
	e.t.Helper()
	ch := e.ch()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return q.Messages
}

func TestTopicRouting(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		ch := e.ch()
		ex := e.x("topic")
		if err := ch.ExchangeDeclare(ex, "topic", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		patterns := map[string]string{"star": "a.*", "hash": "a.#", "tail": "#.c", "exact": "a.b.c", "all": "#"}
		for name, p := range patterns {
			q := e.q(name)
			e.declare(ch, q, nil)
			if err := ch.QueueBind(q, p, ex, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, key := range []string{"a", "a.b", "a.b.c", "x.c", "b.a"} {
			e.publish(ex, key, amqp091.Publishing{Body: []byte(key)})
		}
		want := map[string]string{"star": "a.b", "hash": "a a.b a.b.c", "tail": "a.b.c x.c", "exact": "a.b.c", "all": "a a.b a.b.c x.c b.a"}
		for name, w := range want {
			var got []string
			for {
				d, ok, err := ch.Get(e.prefix+"."+name, true)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, string(d.Body))
			}
			if g := strings.Join(got, " "); g != w {
				t.Errorf("queue bound with %q got %q, want %q", patterns[name], g, w)
			}
		}
	})
}

func TestTTLDeadLetter(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		ch := e.ch()
		dlq, wq := e.q("dead"), e.q("wait")
		e.declare(ch, dlq, nil)
		e.declare(ch, wq, amqp091.Table{"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		e.publish("", wq, amqp091.Publishing{Body: []byte("per-message"), Expiration: "50", Headers: amqp091.Table{"user": "kept"}})
		e.publish("", wq, amqp091.Publishing{Body: []byte("queue-ttl")})
		e.advance(100 * time.Millisecond)
		dc := e.consume(ch, dlq)
		for _, c := range []struct {
			body, originalExpiration string
		}{{"per-message", "50"}, {"queue-ttl", ""}} {
			d := recv(t, dc)
			if string(d.Body) != c.body {
				t.Fatalf("dead letter %q, want %q", d.Body, c.body)
			}
			if d.Exchange != "" || d.RoutingKey != dlq || d.Expiration != "" || d.Redelivered {
				t.Errorf("dead letter exchange %q key %q expiration %q redelivered %v", d.Exchange, d.RoutingKey, d.Expiration, d.Redelivered)
			}
			deaths, ok := d.Headers["x-death"].([]any)
			if !ok || len(deaths) != 1 {
				t.Fatalf("x-death = %#v", d.Headers["x-death"])
			}
			x := deaths[0].(amqp091.Table)
			want := amqp091.Table{"count": int64(1), "reason": "expired", "queue": wq, "exchange": "", "routing-keys": []any{wq}}
			if c.originalExpiration != "" {
				want["original-expiration"] = c.originalExpiration
			}
			if _, isTime := x["time"].(time.Time); !isTime {
				t.Errorf("x-death time = %#v", x["time"])
			}
			delete(x, "time")
			if !equalTables(x, want) {
				t.Errorf("x-death entry = %#v\nwant %#v", x, want)
			}
			for k, v := range map[string]any{"x-first-death-reason": "expired", "x-first-death-queue": wq, "x-first-death-exchange": ""} {
				if d.Headers[k] != v {
					t.Errorf("%s = %#v, want %#v", k, d.Headers[k], v)
				}
			}
			for k := range d.Headers {
				if strings.HasPrefix(k, "x-last-death") {
					t.Errorf("RabbitMQ 3.10 writes no %s", k)
				}
			}
			if c.body == "per-message" && d.Headers["user"] != "kept" {
				t.Errorf("user header lost: %#v", d.Headers)
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestExpiryOnlyAtHead(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		ch := e.ch()
		dlq, wq := e.q("dead"), e.q("wait")
		e.declare(ch, dlq, nil)
		e.declare(ch, wq, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		e.publish("", wq, amqp091.Publishing{Body: []byte("long"), Expiration: "200"})
		e.publish("", wq, amqp091.Publishing{Body: []byte("short"), Expiration: "50"})
		e.advance(50 * time.Millisecond)
		if e.broker != nil {
			if n := len(e.broker.Messages(dlq)); n != 0 {
				t.Fatalf("short delay released past the head: %d dead letters", n)
			}
		}
		e.advance(150 * time.Millisecond)
		dc := e.consume(ch, dlq)
		if d := recv(t, dc); string(d.Body) != "long" {
			t.Fatalf("first dead letter %q, want long", d.Body)
		}
		if d := recv(t, dc); string(d.Body) != "short" {
			t.Fatalf("second dead letter %q, want short", d.Body)
		}
	})
}

// TestQuorumDeliveryLimit pins the off-by-one measured on RabbitMQ 3.10.8: with
// x-delivery-limit = N a message is delivered N+1 times (x-delivery-count 1..N on the
// redeliveries) and the requeue of the last delivery dead-letters it with reason
// delivery_limit; the dead letter carries no x-delivery-count.
func TestQuorumDeliveryLimit(t *testing.T) {
	for _, limit := range []int{0, 2} {
		t.Run("limit"+string(rune('0'+limit)), func(t *testing.T) {
			parity(t, func(t *testing.T, e *env) {
				ch := e.ch()
				dlq, qq := e.q("dead"), e.q("quorum")
				e.declare(ch, dlq, nil)
				e.declare(ch, qq, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(limit),
					"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
				e.publish("", qq, amqp091.Publishing{Body: []byte("m")})
				if err := ch.Qos(1, 0, false); err != nil {
					t.Fatal(err)
				}
				deliveries := e.consume(ch, qq)
				dead := e.consume(e.ch(), dlq)
				n := 0
				for {
					select {
					case d := <-deliveries:
						n++
						wantCount, present := d.Headers["x-delivery-count"]
						if n == 1 && present {
							t.Errorf("first delivery carries x-delivery-count %v", wantCount)
						}
						if n > 1 && wantCount != int64(n-1) {
							t.Errorf("delivery %d: x-delivery-count = %#v, want %d", n, wantCount, n-1)
						}
						if d.Redelivered != (n > 1) {
							t.Errorf("delivery %d: redelivered = %v", n, d.Redelivered)
						}
						if err := d.Reject(true); err != nil {
							t.Fatal(err)
						}
					case d := <-dead:
						if n != limit+1 {
							t.Errorf("dead-lettered after %d deliveries, want %d", n, limit+1)
						}
						x := d.Headers["x-death"].([]any)[0].(amqp091.Table)
						if x["reason"] != "delivery_limit" || x["queue"] != qq || x["count"] != int64(1) {
							t.Errorf("x-death = %#v", x)
						}
						if d.Headers["x-first-death-reason"] != "delivery_limit" {
							t.Errorf("x-first-death-reason = %#v", d.Headers["x-first-death-reason"])
						}
						if _, ok := d.Headers["x-delivery-count"]; ok {
							t.Errorf("dead letter carries x-delivery-count")
						}
						return
					case <-time.After(wait):
						t.Fatalf("after %d deliveries: nothing within %v", n, wait)
					}
				}
			})
		})
	}
}

func TestQuorumRejectDeadLetters(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		ch := e.ch()
		dlq, qq := e.q("dead"), e.q("quorum")
		e.declare(ch, dlq, nil)
		e.declare(ch, qq, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(5),
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		e.publish("", qq, amqp091.Publishing{Body: []byte("m")})
		d := recv(t, e.consume(ch, qq))
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
		dl := recv(t, e.consume(e.ch(), dlq))
		if x := dl.Headers["x-death"].([]any)[0].(amqp091.Table); x["reason"] != "rejected" {
			t.Errorf("x-death reason = %v, want rejected", x["reason"])
		}
	})
}

func TestChannelCloseRequeues(t *testing.T) {
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			parity(t, func(t *testing.T, e *env) {
				q := e.q("work")
				e.declare(e.ch(), q, amqp091.Table{"x-queue-type": typ})
				for _, b := range []string{"1", "2", "3"} {
					e.publish("", q, amqp091.Publishing{Body: []byte(b)})
				}
				first := e.ch()
				c := e.consume(first, q)
				for i := range 3 {
					if d := recv(t, c); d.Redelivered || d.DeliveryTag != uint64(i+1) {
						t.Fatalf("first delivery: tag %d redelivered %v", d.DeliveryTag, d.Redelivered)
					}
				}
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				c = e.consume(e.ch(), q)
				for _, want := range []string{"1", "2", "3"} {
					d := recv(t, c)
					if string(d.Body) != want || !d.Redelivered {
						t.Errorf("after close: %q redelivered %v, want %q redelivered", d.Body, d.Redelivered, want)
					}
					if typ == "quorum" && d.Headers["x-delivery-count"] != int64(1) {
						t.Errorf("after close: x-delivery-count = %#v, want 1", d.Headers["x-delivery-count"])
					}
				}
			})
		})
	}
}

// A returned message comes back before the messages never delivered: a quorum queue keeps its
// returns apart and serves them first, a classic queue puts it back in its place.
func TestReturnedComesFirst(t *testing.T) {
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			parity(t, func(t *testing.T, e *env) {
				q := e.q("work")
				e.declare(e.ch(), q, amqp091.Table{"x-queue-type": typ})
				e.publish("", q, amqp091.Publishing{Body: []byte("1")})
				first := e.ch()
				if err := first.Qos(1, 0, false); err != nil {
					t.Fatal(err)
				}
				if d := recv(t, e.consume(first, q)); string(d.Body) != "1" {
					t.Fatalf("first delivery %q", d.Body)
				}
				for _, b := range []string{"2", "3"} {
					e.publish("", q, amqp091.Publishing{Body: []byte(b)})
				}
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				c := e.consume(e.ch(), q)
				for _, want := range []string{"1", "2", "3"} {
					if d := recv(t, c); string(d.Body) != want || d.Redelivered != (want == "1") {
						t.Errorf("after close: %q redelivered %v, want %q", d.Body, d.Redelivered, want)
					}
				}
			})
		})
	}
}

func TestDeclareMismatch(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, amqp091.Table{"x-message-ttl": int32(100), "other": "ignored"})
		for _, c := range []struct {
			name    string
			durable bool
			args    amqp091.Table
			reason  string
		}{
			{"same, int64 and other args", false, amqp091.Table{"x-message-ttl": int64(100), "other": "different"}, ""},
			{"explicit classic", false, amqp091.Table{"x-message-ttl": int32(100), "x-queue-type": "classic"}, ""},
			{"other ttl", false, amqp091.Table{"x-message-ttl": int32(200)}, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'Q' in vhost '/': received '200' but current is '100'"},
			{"no ttl", false, nil, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'Q' in vhost '/': received none but current is the value '100' of type 'signedint'"},
			{"extra dlx", false, amqp091.Table{"x-message-ttl": int32(100), "x-dead-letter-exchange": ""}, "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'Q' in vhost '/': received the value '' of type 'longstr' but current is none"},
			{"durable", true, amqp091.Table{"x-message-ttl": int32(100)}, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'Q' in vhost '/': received 'true' but current is 'false'"},
		} {
			ch := e.ch()
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			_, err := ch.QueueDeclare(q, c.durable, false, false, false, c.args)
			if c.reason == "" {
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
				continue
			}
			var ae *amqp091.Error
			if !errors.As(err, &ae) || ae.Code != amqp091.PreconditionFailed {
				t.Fatalf("%s: err = %v, want 406", c.name, err)
			}
			if want := strings.NewReplacer("'Q'", "'"+q+"'", "vhost '/'", "vhost '"+e.vhost+"'").Replace(c.reason); ae.Reason != want {
				t.Errorf("%s:\n got %s\nwant %s", c.name, ae.Reason, want)
			}
			if got := closeErr(t, closed); got.Code != amqp091.PreconditionFailed || !ch.IsClosed() {
				t.Errorf("%s: NotifyClose got %v, closed %v", c.name, got, ch.IsClosed())
			}
		}
	})
}

func TestPassiveMissing(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("missing")
		ch := e.ch()
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		var ae *amqp091.Error
		if !errors.As(err, &ae) || ae.Code != amqp091.NotFound || ae.Reason != "NOT_FOUND - no queue '"+q+"' in vhost '"+e.vhost+"'" {
			t.Fatalf("err = %#v", err)
		}
		if got := closeErr(t, closed); got.Code != amqp091.NotFound {
			t.Errorf("NotifyClose got %v", got)
		}
		if _, err := ch.QueueDeclare(e.q("after"), false, false, false, false, nil); !errors.Is(err, amqp091.ErrClosed) {
			t.Errorf("operation on the closed channel: %v, want ErrClosed", err)
		}
	})
}

func TestPublishToMissingExchange(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		x := e.x("missing")
		ch := e.ch()
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		if err := ch.PublishWithContext(context.Background(), x, "k", false, false, amqp091.Publishing{}); err != nil {
			t.Fatalf("publish returned %v; the server closes the channel asynchronously", err)
		}
		if got := closeErr(t, closed); got.Code != amqp091.NotFound || got.Reason != "NOT_FOUND - no exchange '"+x+"' in vhost '"+e.vhost+"'" {
			t.Errorf("NotifyClose got %v", got)
		}
	})
}

func TestUnknownDeliveryTag(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, nil)
		e.publish("", q, amqp091.Publishing{Body: []byte("m")})
		ch := e.ch()
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		d := recv(t, e.consume(ch, q))
		if err := ch.Ack(d.DeliveryTag, false); err != nil {
			t.Fatal(err)
		}
		if err := ch.Ack(d.DeliveryTag, false); err != nil {
			t.Fatalf("second ack returned %v; the server closes the channel asynchronously", err)
		}
		got := closeErr(t, closed)
		if got.Code != amqp091.PreconditionFailed || got.Reason != "PRECONDITION_FAILED - unknown delivery tag 1" {
			t.Errorf("NotifyClose got %v", got)
		}
	})
}

func TestPrefetchBound(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, nil)
		for range 5 {
			e.publish("", q, amqp091.Publishing{Body: []byte("m")})
		}
		ch := e.ch()
		if err := ch.Qos(2, 0, false); err != nil {
			t.Fatal(err)
		}
		c := e.consume(ch, q)
		first := recv(t, c)
		recv(t, c)
		if n := e.ready(q); n != 3 {
			t.Fatalf("ready = %d with prefetch 2, want 3", n)
		}
		if err := first.Ack(false); err != nil {
			t.Fatal(err)
		}
		if d := recv(t, c); d.DeliveryTag != 3 {
			t.Errorf("next delivery tag %d, want 3", d.DeliveryTag)
		}
		if n := e.ready(q); n != 2 {
			t.Fatalf("ready = %d after one ack, want 2", n)
		}
	})
}

func TestMultipleAck(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, nil)
		for range 4 {
			e.publish("", q, amqp091.Publishing{Body: []byte("m")})
		}
		ch := e.ch()
		c := e.consume(ch, q)
		for range 4 {
			recv(t, c)
		}
		if err := ch.Ack(3, true); err != nil {
			t.Fatal(err)
		}
		if err := ch.Close(); err != nil {
			t.Fatal(err)
		}
		if n := e.ready(q); n != 1 {
			t.Fatalf("ready = %d after ack of 1..3 and close, want 1", n)
		}
		ch = e.ch()
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		d, ok, err := ch.Get(q, false)
		if err != nil || !ok || d.DeliveryTag != 1 || !d.Redelivered {
			t.Fatalf("get: %v %v tag %d redelivered %v", ok, err, d.DeliveryTag, d.Redelivered)
		}
		if err := ch.Nack(0, true, false); err != nil {
			t.Fatal(err)
		}
		if err := ch.Ack(0, false); err != nil {
			t.Fatal(err)
		}
		if got := closeErr(t, closed); got.Reason != "PRECONDITION_FAILED - unknown delivery tag 0" {
			t.Errorf("single ack of tag 0: %v", got)
		}
		if n := e.ready(q); n != 0 {
			t.Errorf("ready = %d after nack(0, multiple), want 0", n)
		}
	})
}

func TestPublisherConfirms(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		ch := e.ch()
		e.declare(ch, q, nil)
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
		for range 2 {
			if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{}); err != nil {
				t.Fatal(err)
			}
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, amqp091.Publishing{})
		if err != nil || dc == nil {
			t.Fatalf("deferred publish: %v %v", dc, err)
		}
		for i := range 3 {
			select {
			case c := <-confirms:
				if c.DeliveryTag != uint64(i+1) || !c.Ack {
					t.Errorf("confirmation %d = %+v", i+1, c)
				}
			case <-time.After(wait):
				t.Fatal("no confirmation")
			}
		}
		if !dc.Wait() {
			t.Error("deferred confirmation not acked")
		}
		plain := e.ch()
		if dc, err := plain.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, amqp091.Publishing{}); dc != nil || err != nil {
			t.Errorf("outside confirm mode: %v %v, want nil nil", dc, err)
		}
	})
}

func equalTables(a, b amqp091.Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		if va, isArr := v.([]any); isArr {
			wa, ok := w.([]any)
			if !ok || len(va) != len(wa) {
				return false
			}
			for i := range va {
				if va[i] != wa[i] {
					return false
				}
			}
			continue
		}
		if v != w {
			return false
		}
	}
	return true
}
