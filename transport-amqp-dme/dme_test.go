package amqpdme_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
	amqpdme "github.com/settlehq/settle/transport-amqp-dme"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// dmeURLVar names a RabbitMQ with the rabbitmq_delayed_message_exchange plugin enabled.
const dmeURLVar = "SETTLE_TEST_AMQP_DME_URL"

// plainURL is the RabbitMQ of the other AMQP tests (without the plugin here).
var plainURL = coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")

// server is a broker the cases run on: amqptest on a virtual clock, or a real RabbitMQ with
// the plugin on wall time.
type server struct {
	name string
	dial amqp.DialFunc
	v    *clock.Virtual   // nil on a real server
	mem  *amqptest.Broker // nil on a real server
}

func (s server) clk() clock.Clock {
	if s.v != nil {
		return s.v
	}
	return clock.Real()
}

// delay is d on the virtual clock and wall on a real server.
func (s server) delay(d, wall time.Duration) time.Duration {
	if s.v != nil {
		return d
	}
	return wall
}

// servers returns a fresh amqptest, and the real broker with the plugin when
// SETTLE_TEST_AMQP_DME_URL names one.
func servers(t *testing.T) []server {
	v := clock.NewVirtual(coretest.Epoch)
	mem := amqptest.NewBroker(v)
	out := []server{{name: "amqptest", dial: mem.Dial, v: v, mem: mem}}
	if u := os.Getenv(dmeURLVar); u != "" {
		out = append(out, server{name: "rabbitmq-dme", dial: amqp.URL(u)})
	}
	return out
}

// realDME returns the real broker with the plugin or skips: the plugin is not installed on the
// RabbitMQ of this repository's CI and cannot be installed there, so the skip is not a failure
// under SETTLE_REQUIRE_SERVERS=1 either.
func realDME(t *testing.T) server {
	t.Helper()
	u := os.Getenv(dmeURLVar)
	if u == "" {
		t.Skipf("%s is not set: this case needs a RabbitMQ with the rabbitmq_delayed_message_exchange plugin, which is not installed (and not installable) on the CI's server; the same behaviour runs on amqptest (skipped also under SETTLE_REQUIRE_SERVERS=1)", dmeURLVar)
	}
	c, err := amqp.URL(u)()
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ with the delayed-message plugin", u+" ("+dmeURLVar+")", err)
	}
	_ = c.Close()
	return server{name: "rabbitmq-dme", dial: amqp.URL(u)}
}

// each runs body on amqptest and, when configured, on the real broker with the plugin.
func each(t *testing.T, body func(t *testing.T, s server)) {
	for _, s := range servers(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			body(t, s)
		})
	}
}

// names gives a test unique queue and exchange names and deletes them at the end.
type names struct {
	prefix string
	mu     sync.Mutex
	queues []string
	exs    []string
}

func newNames(t *testing.T, s server) *names {
	n := &names{prefix: "settle-dme-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"}
	t.Cleanup(func() {
		c, err := s.dial()
		if err != nil {
			return
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, q := range n.queues {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
		for _, e := range n.exs {
			_ = ch.ExchangeDelete(e, false, false)
		}
	})
	return n
}

// q names a queue and its default delayed exchange.
func (n *names) q(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	full := n.prefix + name
	n.queues = append(n.queues, full)
	n.exs = append(n.exs, full+amqpdme.Suffix)
	return full
}

// service is one running App with one Broker.
type service struct {
	t      *testing.T
	app    *core.App
	broker *amqp.Broker
	rec    *coretest.Recorder
	logs   *coretest.Logs
	cancel context.CancelFunc
	done   chan error
}

func newService(t *testing.T, s server, declare bool) *service {
	sv := &service{t: t, rec: coretest.NewRecorder(t), logs: &coretest.Logs{}}
	sv.app = core.New(core.WithLogger(slog.New(sv.logs)), core.WithoutSignals(), core.WithObserver(sv.rec.Observe),
		core.WithShutdownTimeout(2*time.Second), core.WithClock(s.clk()))
	b, err := amqp.New(s.dial, amqp.DeclareTopology(declare), amqp.WithLogger(sv.app.Logger()), amqp.WithClock(s.clk()))
	if err != nil {
		t.Fatal(err)
	}
	sv.broker = b
	sv.app.Register(b)
	return sv
}

// mount subscribes h on a classic or quorum queue q whose delayed copies wait in dme.
func mount(sv *service, quorum bool, q string, dme *amqpdme.Exchange, h core.Handler[string], opts ...core.Option) {
	sv.t.Helper()
	var ep core.Endpoint
	var err error
	if quorum {
		ep, err = amqp.Quorum(sv.broker, q, amqp.WithDelay(dme))
	} else {
		ep, err = amqp.Classic(sv.broker, q, amqp.WithDelay(dme))
	}
	if err != nil {
		sv.t.Fatal(err)
	}
	if err := core.Subscribe(sv.app, ep, h, append([]core.Option{core.WithCodec(core.Raw)}, opts...)...); err != nil {
		sv.t.Fatal(err)
	}
}

func (sv *service) start() {
	sv.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sv.cancel = cancel
	sv.done = make(chan error, 1)
	go func() { sv.done <- sv.app.Run(ctx) }()
	sv.t.Cleanup(sv.stop)
	select {
	case <-sv.app.Ready():
	case err := <-sv.done:
		sv.t.Fatalf("App.Run: %v", err)
	case <-time.After(coretest.WaitTimeout):
		sv.t.Fatal("App not ready")
	}
}

func (sv *service) startErr() error {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	return sv.app.Run(ctx)
}

func (sv *service) stop() {
	if sv.cancel == nil {
		return
	}
	sv.cancel()
	sv.cancel = nil
	select {
	case err := <-sv.done:
		if err != nil {
			sv.t.Errorf("App.Run: %v", err)
		}
	case <-time.After(coretest.WaitTimeout):
		sv.t.Error("App.Run did not return")
	}
}

func (sv *service) publish(q, body string, opts ...amqp.PublishOption) {
	sv.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	if err := amqp.Publish(ctx, sv.broker, "", q, body, append([]amqp.PublishOption{amqp.WithPayloadCodec(core.Raw)}, opts...)...); err != nil {
		sv.t.Fatalf("publish: %v", err)
	}
}

// take consumes one message from q within the wait timeout.
func take(t *testing.T, s server, q string) amqp091.Delivery {
	t.Helper()
	c, err := s.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dl, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-dl:
		return m
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("nothing reached %q", q)
	}
	return amqp091.Delivery{}
}

// seen is one handler call.
type seen struct {
	payload string
	attempt int
	at      time.Time
	headers map[string]string
}

type journal struct {
	mu  sync.Mutex
	all []seen
}

func (j *journal) add(c clock.Clock, m *core.Message[string]) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.all = append(j.all, seen{m.Payload, m.Attempt(), c.Now(), m.Headers()})
}

func (j *journal) of(payload string) []seen {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []seen
	for _, s := range j.all {
		if s.payload == payload {
			out = append(out, s)
		}
	}
	return out
}

// The copy waits in the delayed exchange with x-delay and the raised count, comes back no
// earlier than the delay with the user's headers, on classic and quorum queues.
func TestDelayedNoEarlierWithHeaders(t *testing.T) {
	for _, quorum := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "quorum"}[quorum], func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				n := newNames(t, s)
				q := n.q("refunds")
				d := s.delay(30*time.Second, 300*time.Millisecond)
				dme, _ := amqpdme.New()
				var j journal
				sv := newService(t, s, true)
				mount(sv, quorum, q, dme, func(_ context.Context, m *core.Message[string]) error {
					j.add(s.clk(), m)
					if m.Attempt() == 1 {
						return core.RetryAfter(d)
					}
					return nil
				}, core.DeadLetterAfter(5, n.q("refunds.dead")))
				sv.start()
				sv.publish(q, "refund-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}), amqp.WithMessageID("r-1"))
				sv.rec.WaitSettled(1)
				if s.mem != nil {
					if h := s.mem.Held(q + amqpdme.Suffix); h != 1 {
						t.Fatalf("the delayed exchange holds %d", h)
					}
					s.v.Advance(d - time.Millisecond)
					if len(s.mem.Messages(q)) != 0 || s.mem.Held(q+amqpdme.Suffix) != 1 {
						t.Fatal("released a millisecond early")
					}
					s.v.Advance(time.Millisecond)
				}
				sv.rec.WaitSettled(2)
				sv.stop()
				got := j.of("refund-1")
				waited := got[1].at.Sub(got[0].at)
				if waited < d || (s.v == nil && waited > d+5*time.Second) {
					t.Fatalf("came back after %v; delay %v", waited, d)
				}
				h := got[1].headers
				if got[1].attempt != 2 || h["tenant"] != "acme" || h[amqp.RetryCountHeader] != "1" {
					t.Fatalf("second delivery: attempt %d, headers %v", got[1].attempt, h)
				}
				t.Logf("%s: came back after %v (delay %v); x-delay on arrival %q", s.name, waited, d, h[amqpdme.DelayHeader])
			})
		})
	}
}

// A short delay is never held up by a long one, whichever is parked first.
func TestShortDelayNotHeldUpByLong(t *testing.T) {
	for _, order := range [][2]string{{"long", "short"}, {"short", "long"}} {
		t.Run(order[0]+"-first", func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				n := newNames(t, s)
				q := n.q("refunds")
				long, short := s.delay(60*time.Second, 1500*time.Millisecond), s.delay(5*time.Second, 200*time.Millisecond)
				dme, _ := amqpdme.New()
				var j journal
				sv := newService(t, s, true)
				mount(sv, false, q, dme, func(_ context.Context, m *core.Message[string]) error {
					j.add(s.clk(), m)
					switch {
					case m.Attempt() > 1:
						return nil
					case m.Payload == "long":
						return core.RetryAfter(long)
					}
					return core.RetryAfter(short)
				})
				sv.start()
				sv.publish(q, order[0])
				sv.rec.WaitSettled(1)
				sv.publish(q, order[1])
				sv.rec.WaitSettled(2)
				if s.v != nil {
					s.v.Advance(short)
				}
				sv.rec.WaitFor(func(all []core.Settlement) bool { return len(all) >= 3 })
				if got := j.of("short"); len(got) != 2 || len(j.of("long")) != 1 {
					t.Fatalf("after the short delay: short seen %d times, long %d", len(got), len(j.of("long")))
				}
				if s.v != nil {
					s.v.Advance(long - short)
				}
				sv.rec.WaitSettled(4)
				sh, lg := j.of("short"), j.of("long")
				shortWait, longWait := sh[1].at.Sub(sh[0].at), lg[1].at.Sub(lg[0].at)
				if shortWait < short || longWait < long || (s.v == nil && shortWait > long) {
					t.Fatalf("short came back after %v, long after %v", shortWait, longWait)
				}
				t.Logf("%s: %s parked first; short (%v) back after %v, long (%v) after %v", s.name, order[0], short, shortWait, long, longWait)
			})
		})
	}
}

// The service stops while the copy is held; a new service processes it once it is due.
func TestSurvivesRestart(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		n := newNames(t, s)
		q := n.q("refunds")
		d := s.delay(time.Minute, 500*time.Millisecond)
		dme, _ := amqpdme.New()
		first := newService(t, s, true)
		mount(first, false, q, dme, func(context.Context, *core.Message[string]) error { return core.RetryAfter(d) })
		first.start()
		first.publish(q, "refund-1")
		first.rec.WaitSettled(1)
		parked := time.Now()
		first.stop()
		if s.mem != nil && s.mem.Held(q+amqpdme.Suffix) != 1 {
			t.Fatal("the copy is not held while the service is down")
		}
		second := newService(t, s, true)
		var j journal
		mount(second, false, q, dme, func(_ context.Context, m *core.Message[string]) error {
			j.add(s.clk(), m)
			return nil
		})
		second.start()
		if s.v != nil {
			s.v.Advance(d)
		}
		second.rec.WaitSettled(1)
		if got := j.of("refund-1"); len(got) != 1 || got[0].attempt != 2 {
			t.Fatalf("after the restart: %+v", got)
		}
		if s.v == nil && time.Since(parked) < d {
			t.Fatalf("processed before the delay")
		}
	})
}

// A handler that always asks for a delay is stopped by the cap, on classic and quorum queues:
// the copy that reaches it goes to the dead letter with the final count.
func TestCapStopsDelayedLoop(t *testing.T) {
	for _, quorum := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "quorum"}[quorum], func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				n := newNames(t, s)
				q, dead := n.q("payouts"), n.q("payouts.dead")
				d := s.delay(10*time.Second, 100*time.Millisecond)
				dme, _ := amqpdme.New()
				sv := newService(t, s, true)
				mount(sv, quorum, q, dme, func(context.Context, *core.Message[string]) error { return core.RetryAfter(d) },
					core.DeadLetterAfter(3, dead))
				sv.start()
				sv.publish(q, "payout-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}))
				for i := 1; i < 3; i++ {
					sv.rec.WaitSettled(i)
					if s.v != nil {
						s.v.Advance(d)
					}
				}
				m := take(t, s, dead)
				sv.stop()
				if m.Headers[amqp.RetryCountHeader] != "3" || m.Headers["tenant"] != "acme" || m.Headers[amqpdme.DelayHeader] != nil {
					t.Fatalf("dead letter headers %v", m.Headers)
				}
				if n := len(sv.rec.Settlements()); n != 3 {
					t.Fatalf("%d deliveries, want 3", n)
				}
			})
		})
	}
}

// Declaration off: a missing delayed exchange stops the start naming it; declared elsewhere
// (and bound), the subscription starts.
func TestDeclareOffChecksExchange(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		n := newNames(t, s)
		q := n.q("refunds")
		shared := n.prefix + "delays"
		n.exs = append(n.exs, shared)
		dme, err := amqpdme.New(amqpdme.Named(shared))
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ch, _ := c.Channel()
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		sv := newService(t, s, false)
		mount(sv, false, q, dme, func(context.Context, *core.Message[string]) error { return nil })
		err = sv.startErr()
		if !errors.Is(err, amqp.ErrNotFound) || !strings.Contains(err.Error(), shared) {
			t.Fatalf("start error %v: want ErrNotFound naming %q", err, shared)
		}
		t.Logf("%s: %v", s.name, err)

		if err := ch.ExchangeDeclare(shared, amqpdme.ExchangeType, true, false, false, false, dme.Args()); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, q, shared, false, nil); err != nil {
			t.Fatal(err)
		}
		again := newService(t, s, false)
		mount(again, false, q, dme, func(context.Context, *core.Message[string]) error { return nil })
		again.start()
	})
}

// A server without the plugin refuses the exchange type; the subscription does not start and
// the error says to enable the plugin. On amqptest the plugin is switched off; the real
// RabbitMQ of the other AMQP tests has no plugin here.
func TestPluginMissing(t *testing.T) {
	run := func(t *testing.T, s server) {
		n := newNames(t, s)
		q := n.q("refunds")
		dme, _ := amqpdme.New()
		sv := newService(t, s, true)
		mount(sv, false, q, dme, func(context.Context, *core.Message[string]) error { return nil })
		err := sv.startErr()
		var pe *amqpdme.PluginError
		if !errors.Is(err, amqpdme.ErrPluginMissing) || !errors.As(err, &pe) || pe.Exchange != q+amqpdme.Suffix ||
			!strings.Contains(err.Error(), "rabbitmq-plugins enable rabbitmq_delayed_message_exchange") {
			t.Fatalf("start error %v", err)
		}
		var ae *amqp091.Error
		if !errors.As(err, &ae) || ae.Code != amqp091.CommandInvalid {
			t.Fatalf("server error %v", ae)
		}
		t.Logf("%s: %v", s.name, err)
	}
	t.Run("amqptest", func(t *testing.T) {
		t.Parallel()
		v := clock.NewVirtual(coretest.Epoch)
		mem := amqptest.NewBroker(v, amqptest.WithoutDelayedMessagePlugin())
		run(t, server{name: "amqptest", dial: mem.Dial, v: v, mem: mem})
	})
	t.Run("rabbitmq", func(t *testing.T) {
		t.Parallel()
		c, err := amqp.URL(plainURL)()
		if err != nil {
			coretest.ServerUnavailable(t, "RabbitMQ", plainURL+" (SETTLE_TEST_AMQP_URL)", err)
		}
		_ = c.Close()
		if os.Getenv(dmeURLVar) == plainURL {
			t.Skipf("%s names the same server, which has the plugin", dmeURLVar)
		}
		run(t, server{name: "rabbitmq", dial: amqp.URL(plainURL)})
	})
}

// TestRealBrokerWithPlugin states in the test output whether the cases above ran on a real
// broker with the plugin.
func TestRealBrokerWithPlugin(t *testing.T) {
	s := realDME(t)
	t.Logf("the cases above also ran on %s (%s)", s.name, os.Getenv(dmeURLVar))
}

func TestOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		opt  amqpdme.Option
		want string
	}{
		{amqpdme.Named(" "), "empty"},
		{amqpdme.Named("amq.delays"), "reserved"},
		{amqpdme.Named(strings.Repeat("x", 256)), "at most 255"},
		{nil, "nil option"},
	} {
		if _, err := amqpdme.New(c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: error %v, want one mentioning %q", err, c.want)
		}
	}
	dme, _ := amqpdme.New()
	msg := amqp091.Publishing{}
	ex, key := dme.Route("refunds", 1500*time.Microsecond, &msg)
	if ex != "refunds.delay" || key != "refunds" || msg.Headers[amqpdme.DelayHeader] != int64(2) {
		t.Errorf("Route: %q %q %v", ex, key, msg.Headers)
	}
	if w := dme.Where("refunds"); !strings.Contains(w, `"refunds.delay"`) {
		t.Errorf("Where: %s", w)
	}
}
