package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// server is one broker the AMQP cases run on: the real RabbitMQ or amqptest.
type server struct {
	name string
	dial amqp.DialFunc
	// kill drops every connection the dial function made, as a network fault would.
	kill func()
	// args reads back a queue's arguments with the broker's management tools.
	args func(t *testing.T, queue string) string
	// info describes a queue for failure messages (amqptest only).
	info func(queue string) string
	// counts reads queues' counts as the management API does: amqptest's broker, or the
	// management plugin at SETTLE_TEST_AMQP_MANAGEMENT_URL; nil when the server has none.
	counts amqp.QueueCounter
	real   bool
}

// servers returns the brokers to run a case on; the real one only when it is reachable.
func servers(t *testing.T) []server {
	srv := amqptest.NewBroker(clock.Real())
	out := []server{{
		name: "amqptest", dial: srv.Dial, kill: srv.CloseAllConnections,
		args:   func(t *testing.T, q string) string { return fmt.Sprint(srv.QueueArgs(q)) },
		info:   func(q string) string { i, _ := srv.Queue(q); return fmt.Sprintf("%+v", i) },
		counts: srv,
	}}
	c, err := amqp.URL(url)()
	if err != nil {
		if coretest.RequireServers() {
			t.Fatalf("RabbitMQ at %s is required (SETTLE_REQUIRE_SERVERS=1) but unreachable: %v", url, err)
		}
		t.Logf("RabbitMQ at %s unreachable, running on amqptest only: %v", url, err)
		return out
	}
	_ = c.Close()
	var mu sync.Mutex
	var conns []net.Conn
	dial := func() (amqp.Connection, error) {
		return amqp.Dial(url, amqp091.Config{Heartbeat: 10 * time.Second, Dial: func(network, addr string) (net.Conn, error) {
			c, err := net.DialTimeout(network, addr, 5*time.Second)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}})
	}
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
	}
	var counts amqp.QueueCounter
	if m := os.Getenv("SETTLE_TEST_AMQP_MANAGEMENT_URL"); m != "" {
		_, vhost := urlParts(t)
		if counts, err = amqp.ManagementAPI(m, vhost); err != nil {
			t.Fatalf("SETTLE_TEST_AMQP_MANAGEMENT_URL: %v", err)
		}
	}
	return append(out, server{name: "rabbitmq", dial: dial, kill: kill, real: true, counts: counts,
		args: func(t *testing.T, q string) string {
			_, vhost := urlParts(t)
			out, err := exec.Command("rabbitmqctl", "list_queues", "-p", vhost, "-q", "--no-table-headers", "name", "arguments").CombinedOutput()
			if err != nil {
				t.Skipf("rabbitmqctl unavailable to read queue arguments: %v", err)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, q+"\t") {
					return line
				}
			}
			t.Fatalf("rabbitmqctl list_queues does not show %q", q)
			return ""
		}})
}

// each runs body once per server as a parallel subtest.
func each(t *testing.T, body func(t *testing.T, s server)) {
	for _, s := range servers(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			body(t, s)
		})
	}
}

// rig is one App on one server with a backend for publishing and draining.
type rig struct {
	t      *testing.T
	s      server
	be     *backend
	app    *core.App
	rec    *coretest.Recorder
	logs   *coretest.Logs
	broker *amqp.Broker
	done   chan error
	cancel context.CancelFunc

	refused   atomic.Int64    // copy_refused events reported to the App
	discarded chan core.Event // discarded events reported to the App (buffered; extra ones are counted, not kept)

	mu     sync.Mutex
	opened map[string]chan struct{}
}

// subscribe mounts h on ep and lets publish wait until ep has opened (declared its queue).
func subscribe[T any](r *rig, ep core.Endpoint, h core.Handler[T], opts ...core.Option) {
	r.t.Helper()
	ch := make(chan struct{})
	r.mu.Lock()
	r.opened[ep.Queue()] = ch
	r.mu.Unlock()
	if err := core.Subscribe(r.app, notifyOpen{ep, ch}, h, opts...); err != nil {
		r.t.Fatalf("Subscribe: %v", err)
	}
}

type notifyOpen struct {
	core.Endpoint
	opened chan struct{}
}

func (n notifyOpen) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := n.Endpoint.Open(ctx, sub)
	if err == nil {
		close(n.opened)
	}
	return src, fin, err
}

// waitOpen waits until the subscription on q (if any) has opened.
func (r *rig) waitOpen(q string) {
	r.t.Helper()
	r.mu.Lock()
	ch := r.opened[q]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(coretest.WaitTimeout):
		r.t.Fatalf("queue %q never opened", q)
	}
}

func newRig(t *testing.T, s server, declare bool) *rig { return newRigLogging(t, s, declare, nil) }

// newRigLogging is newRig whose App logs through wrap(the rig's Logs) when wrap is not nil.
func newRigLogging(t *testing.T, s server, declare bool, wrap func(slog.Handler) slog.Handler) *rig {
	r := &rig{t: t, s: s, be: newBackend(t, s.dial, clock.Real(), false), rec: coretest.NewRecorder(t), logs: &coretest.Logs{},
		opened: map[string]chan struct{}{}, discarded: make(chan core.Event, 16)}
	once := newOnceKeys(r.logs)
	t.Cleanup(func() { once.check(t) })
	var h slog.Handler = once
	if wrap != nil {
		h = wrap(h)
	}
	r.app = core.New(core.WithLogger(slog.New(h)), core.WithoutSignals(), core.WithObserver(r.rec.Observe),
		core.WithShutdownTimeout(2*time.Second), core.WithEventObserver(func(e core.Event) {
			switch e.Kind {
			case core.EventCopyRefused:
				r.refused.Add(1)
			case core.EventDiscarded:
				select {
				case r.discarded <- e:
				default:
					t.Errorf("more discarded events than the test expects: %+v", e)
				}
			}
		}))
	b, err := amqp.New(s.dial, amqp.DeclareTopology(declare), amqp.WithLogger(r.app.Logger()),
		amqp.ReconnectBackoff(10*time.Millisecond, 200*time.Millisecond), amqp.CopyRetryBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r.broker = b
	r.app.Register(b)
	return r
}

// q returns the test's name for a logical queue (registered for deletion).
func (r *rig) q(name string) string { return r.be.name(name) }

func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- r.app.Run(ctx) }()
	r.t.Cleanup(r.stop)
}

func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("App.Run: %v", err)
		}
	case <-time.After(coretest.WaitTimeout):
		r.t.Errorf("App.Run did not return")
	}
}

// run starts the App and returns Run's error when it fails to start (nil while it runs).
func (r *rig) startErr() error {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.app.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errors.New("App.Run did not fail")
	}
}

// publish puts a message on a queue through the settle publishing API.
func (r *rig) publish(queue, body string, opts ...amqp.PublishOption) {
	r.t.Helper()
	r.waitOpen(queue)
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := amqp.Publish(ctx, r.broker, "", queue, body, append([]amqp.PublishOption{amqp.WithPayloadCodec(core.Raw)}, opts...)...); err != nil {
		r.t.Fatalf("publish: %v", err)
	}
}

func (r *rig) drain(queue string, atLeast int) []amqp091.Delivery {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	m, err := drainRaw(ctx, r.be.conn(), queue, atLeast)
	if err != nil {
		r.t.Fatalf("drain %q: %v", queue, err)
	}
	return m
}

// declare creates a classic queue with args from the test side.
func (r *rig) declare(queue string, args amqp091.Table) {
	r.t.Helper()
	ch, err := r.be.conn().Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		r.t.Fatalf("declare %q: %v", queue, err)
	}
}

var rawCodec = core.WithCodec(core.Raw)

func TestClassicCapCopiesCountUpToDeadLetter(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("refunds"), r.q("refunds.dead")
		seen := make(chan *amqp.Delivery, 10)
		ep, err := amqp.Classic(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			seen <- m.Delivery().(*amqp.Delivery)
			return core.Retry()
		}, rawCodec, core.DeadLetterAfter(5, dead))
		r.start()
		r.publish(q, "refund-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}), amqp.WithCorrelationID("c-1"), amqp.WithMessageID("r-1"))
		got := r.drain(dead, 1)
		r.stop()
		if len(got) != 1 {
			t.Fatalf("dead letter holds %d messages, want 1", len(got))
		}
		m := got[0]
		if m.Headers[amqp.RetryCountHeader] != "5" || string(m.Body) != "refund-1" || m.Headers["tenant"] != "acme" ||
			m.MessageId != "r-1" || m.CorrelationId != "c-1" || m.ContentType != "application/octet-stream" {
			t.Fatalf("dead letter %+v", m)
		}
		for k := range m.Headers {
			if strings.HasPrefix(k, "x-") {
				t.Errorf("copy carries broker header %q", k)
			}
		}
		close(seen)
		var attempts []int
		for d := range seen {
			attempts = append(attempts, d.Attempt())
			if d.Redelivered() {
				t.Errorf("attempt %d was a redelivery; copies are new messages", d.Attempt())
			}
		}
		if fmt.Sprint(attempts) != "[1 2 3 4 5]" {
			t.Fatalf("attempts %v, want exactly 5 deliveries", attempts)
		}
		if n := len(r.drain(q, 0)); n != 0 {
			t.Fatalf("queue still holds %d", n)
		}
	})
}

func TestQuorumCapMovesWithReason(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("payouts"), r.q("payouts.dead")
		ep, err := amqp.Quorum(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		var counts []int
		var mu sync.Mutex
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			d := m.Delivery().(*amqp.QuorumDelivery)
			mu.Lock()
			counts = append(counts, d.RedeliveryCount())
			mu.Unlock()
			if m.Attempt() != d.RedeliveryCount()+1 {
				t.Errorf("attempt %d with x-delivery-count %d", m.Attempt(), d.RedeliveryCount())
			}
			return core.Retry()
		}, rawCodec, core.DeadLetterAfter(5, dead))
		r.start()
		r.publish(q, "payout-1")
		got := r.drain(dead, 1)
		r.stop()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(counts) != "[0 1 2 3 4]" {
			t.Fatalf("x-delivery-count per delivery %v, want 5 deliveries", counts)
		}
		// settle moves the message at its cap itself, with why it died; the server's delivery
		// limit is only the backstop for deliveries that never settle.
		h := map[string]string{}
		for k, v := range got[0].Headers {
			if s, ok := v.(string); ok {
				h[k] = s
			}
		}
		info, ok, err := core.ParseDeadLetterInfo(h)
		if !ok || err != nil || info.Count != 5 || info.Origin != q || !strings.Contains(info.Error, "retry at attempt 5 of 5") ||
			string(got[0].Body) != "payout-1" {
			t.Fatalf("dead letter %+v (%v, %v), body %q", info, ok, err, got[0].Body)
		}
		args := s.args(t, q)
		if !hasArg(args, "x-delivery-limit", strconv.Itoa(5+amqp.BackstopMargin)) {
			t.Errorf("queue arguments %s: want x-delivery-limit %d", args, 5+amqp.BackstopMargin)
		}
		for _, want := range []string{"x-dead-letter-routing-key", dead, "x-queue-type", "quorum",
			"x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish"} {
			if !strings.Contains(args, want) {
				t.Errorf("queue arguments %s lack %q", args, want)
			}
		}
		t.Logf("%s: queue arguments %s", s.name, args)
	})
}

func TestDropWithAndWithoutDLX(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		plain, routed, dropped := r.q("plain"), r.q("routed"), r.q("dropped")
		r.declare(dropped, nil)
		a, err := amqp.Classic(r.broker, plain)
		if err != nil {
			t.Fatal(err)
		}
		b, err := amqp.Classic(r.broker, routed, amqp.DeadLetterExchange("", dropped))
		if err != nil {
			t.Fatal(err)
		}
		drop := func(context.Context, *core.Message[string]) error { return core.Drop() }
		for _, ep := range []core.Endpoint{a, b} {
			subscribe(r, ep, drop, rawCodec)
		}
		r.start()
		r.publish(plain, "p")
		r.publish(routed, "d")
		r.rec.WaitSettled(2)
		got := r.drain(dropped, 1)
		r.stop()
		if len(got) != 1 || string(got[0].Body) != "d" {
			t.Fatalf("the queue's DLX holds %d: %v", len(got), got)
		}
		if reason, _ := death(got[0].Headers); reason != "rejected" {
			t.Fatalf("x-death reason %q", reason)
		}
		if n := len(r.drain(plain, 0)) + len(r.drain(routed, 0)); n != 0 {
			t.Fatalf("dropped messages still queued: %d", n)
		}
	})
}

func TestChannelClosedMidHandlerRedelivers(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				r := newRig(t, s, true)
				q := r.q("work")
				var ep core.Endpoint
				var err error
				if k.quorum {
					ep, err = amqp.Quorum(r.broker, q)
				} else {
					ep, err = amqp.Classic(r.broker, q)
				}
				if err != nil {
					t.Fatal(err)
				}
				type seen struct {
					attempt int
					epoch   uint64
				}
				ch := make(chan seen, 4)
				subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
					ch <- seen{m.Attempt(), amqp.Epoch(m.Delivery())}
					if m.Attempt() == 1 {
						if err := amqp.CloseChannel(m.Delivery()); err != nil {
							t.Errorf("close channel: %v", err)
						}
					}
					return nil
				}, rawCodec)
				r.start()
				r.publish(q, "m")
				// Two settlements, in either order: the channel's death reports the first
				// delivery's failed ack while the redelivery may already be settled.
				got := slices.Clone(r.rec.WaitFor(func(s []core.Settlement) bool { return len(s) == 2 }))
				slices.SortFunc(got, func(a, b core.Settlement) int { return a.Delivery.Attempt() - b.Delivery.Attempt() })
				if !errors.Is(got[0].Err, amqp.ErrChannelGone) {
					t.Fatalf("settlement on the closed channel: %v", got[0].Err)
				}
				if got[1].Err != nil || got[1].Verdict.Action != core.ActAck {
					t.Fatalf("settlement of the redelivery: %v %v", got[1].Verdict, got[1].Err)
				}
				first, second := <-ch, <-ch
				if first.attempt != 1 || second.attempt != 2 || second.epoch <= first.epoch {
					t.Fatalf("deliveries %+v then %+v: want attempt 2 on a later channel", first, second)
				}
				r.stop()
				if n := len(r.drain(q, 0)); n != 0 {
					t.Fatalf("queue holds %d after the redelivery was acked", n)
				}
			})
		})
	}
}

func TestDeclareOffMissingQueueFailsStart(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q := r.q("absent")
		ep, err := amqp.Classic(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return nil })
		err = r.startErr()
		if !errors.Is(err, amqp.ErrNotFound) || !strings.Contains(err.Error(), q) {
			t.Fatalf("start error %v: want ErrNotFound naming %q", err, q)
		}
		t.Logf("%s: %v", s.name, err)
	})
}

func TestDeclareOffMissingDeadLetterFailsStart(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q, dead := r.q("present"), r.q("present.dead")
		r.declare(q, nil)
		ep, _ := amqp.Classic(r.broker, q)
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return nil }, core.DeadLetterAfter(3, dead))
		err := r.startErr()
		if !errors.Is(err, amqp.ErrNotFound) || !strings.Contains(err.Error(), dead) {
			t.Fatalf("start error %v: want ErrNotFound naming %q", err, dead)
		}
	})
}

func TestQuorumCapWithoutDeclareRefused(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q := r.q("payouts")
		ep, err := amqp.Quorum(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return nil }, core.DeadLetterAfter(5, "payouts.dead"))
		err = r.startErr()
		if err == nil || !strings.Contains(err.Error(), "DeclareTopology(true)") || !strings.Contains(err.Error(), q) {
			t.Fatalf("start error %v", err)
		}
	})
}

func TestMismatchNamesBothArgumentSets(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q := r.q("payouts")
		r.declare(q, amqp091.Table{"x-max-length": int64(10)})
		ep, _ := amqp.Quorum(r.broker, q)
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return nil })
		err := r.startErr()
		var te *amqp.TopologyError
		if !errors.As(err, &te) || !errors.Is(err, amqp.ErrMismatch) || te.Name != q {
			t.Fatalf("start error %v: want a TopologyError mismatch on %q", err, q)
		}
		// Ours in full; the server's side as RabbitMQ words it.
		if !strings.Contains(err.Error(), "x-queue-type=quorum") || !strings.Contains(err.Error(), "PRECONDITION_FAILED") {
			t.Fatalf("error does not show both sides: %v", err)
		}
		t.Logf("%s: %v", s.name, err)
	})
}

func TestInvalidDescriptors(t *testing.T) {
	b, err := amqp.New(amqp.URL(url))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("q", 256)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"long queue name", func() error { _, err := amqp.Classic(b, long); return err }(), "at most 255"},
		{"long binding key", func() error { _, err := amqp.Classic(b, "q", amqp.Bind("ex", "topic", long)); return err }(), "routing key"},
		{"limit without route", func() error { _, err := amqp.Quorum(b, "q", amqp.DeliveryLimit(3)); return err }(), "without DeadLetterExchange"},
		{"settle's own argument", func() error {
			_, err := amqp.Quorum(b, "q", amqp.Arguments(amqp091.Table{"x-delivery-limit": int64(3)}))
			return err
		}(), "DeliveryLimit"},
		{"zero prefetch", func() error { _, err := amqp.Classic(b, "q", amqp.Prefetch(0)); return err }(), "Prefetch(0)"},
		{"empty name", func() error { _, err := amqp.Classic(b, " "); return err }(), "empty"},
		{"publish long key", amqp.Publish(context.Background(), b, "", long, "x"), "routing key"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, c.err, c.want)
		}
	}
	// A limit with a route but without declaring cannot be reached.
	if _, err := amqp.Quorum(b, "q", amqp.DeliveryLimit(3), amqp.DeadLetterExchange("", "q.dead")); err == nil || !strings.Contains(err.Error(), "DeclareTopology") {
		t.Errorf("DeliveryLimit without DeclareTopology: %v", err)
	}
}

func TestRetryCountOfWrongTypeCountsZero(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q := r.q("work")
		ep, _ := amqp.Classic(r.broker, q)
		attempt := make(chan int, 1)
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			attempt <- m.Attempt()
			return nil
		}, rawCodec)
		r.start()
		ch, _ := r.be.conn().Channel()
		defer ch.Close()
		r.waitOpen(q)
		if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{
			Body: []byte("m"), MessageId: "bad-count", Headers: amqp091.Table{amqp.RetryCountHeader: int32(7)}}); err != nil {
			t.Fatal(err)
		}
		r.rec.WaitSettled(1)
		if a := <-attempt; a != 1 {
			t.Fatalf("attempt %d, want 1", a)
		}
		recs := r.logs.Find("amqp: " + amqp.RetryCountHeader + " header is not a decimal string; counting it as 0")
		if len(recs) != 1 || recs[0].Attrs["message_id"] != "bad-count" || recs[0].Attrs["queue"] != q {
			t.Fatalf("log records %+v", recs)
		}
	})
}

// The publishing API: a typed payload, headers, ids, persistence and publisher confirms, read
// back with the broker's own client; a publish to a missing exchange is refused under confirms.
func TestPublishTyped(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q := r.q("typed")
		r.declare(q, nil)
		ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
		defer cancel()
		if err := amqp.Publish(ctx, r.broker, "", q, Refund{ID: 9, Card: "4242"}, amqp.WithConfirm(),
			amqp.WithHeaders(map[string]string{"tenant": "acme"}), amqp.WithMessageID("r-9"), amqp.WithCorrelationID("c-9")); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		if err := amqp.Publish(ctx, r.broker, "", q, "plain", amqp.Transient(), amqp.WithPayloadCodec(core.Raw)); err != nil {
			t.Fatalf("Publish transient: %v", err)
		}
		got := r.drain(q, 2)
		if len(got) != 2 {
			t.Fatalf("queue holds %d", len(got))
		}
		m := got[0]
		if string(m.Body) != `{"id":9,"card":"4242"}` || m.ContentType != "application/json" || m.DeliveryMode != amqp091.Persistent ||
			m.MessageId != "r-9" || m.CorrelationId != "c-9" || m.Headers["tenant"] != "acme" {
			t.Fatalf("published %+v", m)
		}
		if got[1].DeliveryMode != amqp091.Transient || got[1].MessageId == "" || string(got[1].Body) != "plain" {
			t.Fatalf("transient message %+v", got[1])
		}
		if err := amqp.Publish(ctx, r.broker, "no-such-exchange-"+q, "k", 1, amqp.WithConfirm()); err == nil {
			t.Fatal("publish to a missing exchange succeeded under confirms")
		}
		if err := amqp.Publish(ctx, r.broker, "", q, 1, amqp.WithHeaders(map[string]string{"x-death": "no"})); err == nil {
			t.Fatal("a reserved x- header was accepted")
		}
	})
}

// Issue 15 defect 6 / issue 24 item 3: count headers are read strictly and within bounds. A
// settle-retry-count near the int64 limit is clamped to core.MaxCount (the message is past any
// cap: it goes to the dead letter without its handler), "+5" and "007" count as 0, and on a
// quorum queue a negative x-delivery-count reads as 0; each anomaly is logged.
func TestCountHeadersStrictAndClamped(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				r := newRig(t, s, true)
				q, dead := r.q("counts"), r.q("counts.dead")
				attempts := make(chan int, 8)
				subscribe(r, endpointOf(t, r.broker, k.quorum, q), func(_ context.Context, m *core.Message[string]) error {
					attempts <- m.Attempt()
					return nil
				}, rawCodec, core.DeadLetterAfter(3, dead))
				r.start()
				r.waitOpen(q)
				ch, err := r.be.conn().Channel()
				if err != nil {
					t.Fatal(err)
				}
				defer ch.Close()
				pub := func(id string, h amqp091.Table) {
					if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{
						Body: []byte(id), MessageId: id, Headers: h}); err != nil {
						t.Fatal(err)
					}
				}
				pub("huge", amqp091.Table{amqp.RetryCountHeader: "9223372036854775807"})
				pub("plus", amqp091.Table{amqp.RetryCountHeader: "+5"})
				pub("zeros", amqp091.Table{amqp.RetryCountHeader: "007"})
				if k.quorum {
					pub("negative", amqp091.Table{"x-delivery-count": int64(-50)})
				}
				dl := r.drain(dead, 1)
				n := 3
				if k.quorum {
					n = 4
				}
				st := r.rec.WaitSettled(n)
				r.stop()
				if len(dl) != 1 || string(dl[0].Body) != "huge" {
					t.Fatalf("dead letter %v", dl)
				}
				for _, x := range st {
					id, a := x.Delivery.ID(), x.Delivery.Attempt()
					switch {
					case id == "huge" && (a != core.MaxCount+1 || x.Verdict.Action != core.ActDeadLetter):
						t.Errorf("huge: attempt %d, %v", a, x.Verdict)
					case id != "huge" && (a != 1 || x.Verdict.Action != core.ActAck):
						t.Errorf("%s: attempt %d, %v", id, a, x.Verdict)
					}
				}
				if len(attempts) != n-1 {
					t.Errorf("handler ran %d times; the clamped message is past its cap", len(attempts))
				}
				if got := len(r.logs.Find("amqp: " + amqp.RetryCountHeader + " header is above the bound; clamped")); got != 1 {
					t.Errorf("%d clamp warnings", got)
				}
				if got := len(r.logs.Find("amqp: " + amqp.RetryCountHeader + " header is not a decimal string; counting it as 0")); got != 2 {
					t.Errorf("%d malformed-count warnings", got)
				}
				if k.quorum && len(r.logs.Find("amqp: x-delivery-count header out of range; read within [0, core.MaxCount]")) != 1 {
					t.Errorf("the negative x-delivery-count was not logged")
				}
			})
		})
	}
}

// URLs connects to the first address that accepts: a node that is down is skipped.
func TestURLsSkipsADeadNode(t *testing.T) {
	realServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "amqp://guest:secret@" + l.Addr().String() + "/"
	l.Close() // nothing listens there now
	c, err := amqp.URLs(dead, url)()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	_, err = amqp.URLs(dead)()
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v: want the address named, the password hidden", err)
	}
}
