package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// delayServer is a broker the delay cases run on: amqptest on a virtual clock of its own, or
// the real RabbitMQ on wall time.
type delayServer struct {
	server
	v   *clock.Virtual   // nil on the real server
	mem *amqptest.Broker // nil on the real server
}

// delayServers returns a fresh amqptest on a virtual clock and, when reachable, the real
// RabbitMQ (required under SETTLE_REQUIRE_SERVERS=1).
func delayServers(t *testing.T) []delayServer {
	v := clock.NewVirtual(coretest.Epoch)
	mem := amqptest.NewBroker(v)
	out := []delayServer{{server: server{name: "amqptest", dial: mem.Dial, kill: mem.CloseAllConnections}, v: v, mem: mem}}
	for _, s := range servers(t) {
		if s.real {
			out = append(out, delayServer{server: s})
		}
	}
	return out
}

// eachDelay runs body once per delay server as a parallel subtest.
func eachDelay(t *testing.T, body func(t *testing.T, s delayServer)) {
	for _, s := range delayServers(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			body(t, s)
		})
	}
}

// clk is the clock the server's Apps run on.
func (s delayServer) clk() clock.Clock {
	if s.v != nil {
		return s.v
	}
	return clock.Real()
}

// delay is the RetryAfter delay of a case: d on the virtual clock, short on wall time.
func (s delayServer) delay(virtual, wall time.Duration) time.Duration {
	if s.v != nil {
		return virtual
	}
	return wall
}

// newDelayRig is newRig on the delay server's clock; be is shared with an earlier rig when a
// case restarts the service on the same queues (nil: a fresh one).
func newDelayRig(t *testing.T, s delayServer, be *backend, declare bool) *rig {
	if be == nil {
		be = newBackend(t, s.dial, s.clk(), false)
	}
	r := &rig{t: t, s: s.server, be: be, rec: coretest.NewRecorder(t), logs: &coretest.Logs{}, opened: map[string]chan struct{}{}}
	r.app = core.New(core.WithLogger(slog.New(r.logs)), core.WithoutSignals(), core.WithObserver(r.rec.Observe),
		core.WithShutdownTimeout(2*time.Second), core.WithClock(s.clk()))
	b, err := amqp.New(s.dial, amqp.DeclareTopology(declare), amqp.WithLogger(r.app.Logger()), amqp.WithClock(s.clk()),
		amqp.ReconnectBackoff(10*time.Millisecond, 200*time.Millisecond), amqp.CopyRetryBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r.broker = b
	r.app.Register(b)
	return r
}

// ready is how many messages queue holds ready, read with a passive declaration.
func (r *rig) ready(queue string) int {
	r.t.Helper()
	ch, err := r.be.conn().Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("passive declare %q: %v", queue, err)
	}
	return q.Messages
}

// handled records what a handler saw, with the App's clock.
type handled struct {
	payload string
	attempt int
	at      time.Time
	headers map[string]string
	raw     amqp091.Delivery
}

type journal struct {
	mu  sync.Mutex
	all []handled
}

func (j *journal) add(c clock.Clock, m *core.Message[string]) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var raw amqp091.Delivery
	switch d := m.Delivery().(type) {
	case *amqp.Delivery:
		raw = d.Raw()
	case *amqp.QuorumDelivery:
		raw = d.Raw()
	}
	j.all = append(j.all, handled{m.Payload, m.Attempt(), c.Now(), m.Headers(), raw})
}

func (j *journal) of(payload string) []handled {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []handled
	for _, h := range j.all {
		if h.payload == payload {
			out = append(out, h)
		}
	}
	return out
}

// TestDLXTTLConformance runs the conformance suite with every queue mounted with DLXTTL(), so
// RetryAfterNoEarlier and CapStopsDelayedLoop go through waiting queues.
func TestDLXTTLConformance(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			t.Run("amqptest", func(t *testing.T) {
				transporttest.Run(t, func(t *testing.T) transporttest.Env {
					v := clock.NewVirtual(coretest.Epoch)
					be := newBackend(t, amqptest.NewBroker(v).Dial, v, k.quorum, amqp.DLXTTL())
					be.name("work" + amqp.RetrySuffix)
					return transporttest.Env{Backend: be, Features: transporttest.Features{CountsAtTake: k.quorum}, Clock: v, Virtual: v}
				})
			})
			t.Run("rabbitmq", func(t *testing.T) {
				dial := realServer(t)
				transporttest.Run(t, func(t *testing.T) transporttest.Env {
					c := clock.Real()
					be := newBackend(t, dial, c, k.quorum, amqp.DLXTTL())
					be.name("work" + amqp.RetrySuffix)
					return transporttest.Env{Backend: be, Features: transporttest.Features{CountsAtTake: k.quorum}, Clock: c}
				})
			})
		})
	}
}

// The copy waits in <queue>.retry with the delay as its expiration and the count raised, comes
// back no earlier than the delay (virtual clock: not a millisecond before; RabbitMQ: bounded
// wall time) with the user's headers and properties, and no x-death of its own carried in.
func TestDLXTTLDelaysCopyWithHeaders(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			eachDelay(t, func(t *testing.T, s delayServer) {
				r := newDelayRig(t, s, nil, true)
				q, dead := r.q("refunds"), r.q("refunds.dead")
				waiting := r.q("refunds" + amqp.RetrySuffix)
				d := s.delay(30*time.Second, 300*time.Millisecond)
				var j journal
				subscribe(r, endpointOf(t, r.broker, k.quorum, q, amqp.DLXTTL()), func(_ context.Context, m *core.Message[string]) error {
					j.add(s.clk(), m)
					if m.Attempt() == 1 {
						return core.RetryAfter(d)
					}
					return nil
				}, rawCodec, core.DeadLetterAfter(5, dead))
				r.start()
				r.publish(q, "refund-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}), amqp.WithMessageID("r-1"), amqp.WithCorrelationID("c-1"))
				r.rec.WaitSettled(1)
				if s.mem != nil {
					parked := s.mem.Messages(waiting)
					if len(parked) != 1 {
						t.Fatalf("waiting queue holds %d", len(parked))
					}
					p := parked[0]
					want := fmt.Sprint(d.Milliseconds())
					if p.Expiration != want || p.Headers[amqp.RetryCountHeader] != "1" || p.Headers["tenant"] != "acme" || p.Headers["x-death"] != nil {
						t.Fatalf("parked copy: expiration %q (want %s), headers %v", p.Expiration, want, p.Headers)
					}
					s.v.Advance(d - time.Millisecond)
					if n, w := len(s.mem.Messages(q)), len(s.mem.Messages(waiting)); n != 0 || w != 1 || len(r.rec.Settlements()) != 1 {
						t.Fatalf("a millisecond before the delay: queue %d, waiting %d, settlements %d", n, w, len(r.rec.Settlements()))
					}
					s.v.Advance(time.Millisecond)
				}
				r.rec.WaitSettled(2)
				r.stop()
				got := j.of("refund-1")
				if len(got) != 2 {
					t.Fatalf("handled %d times", len(got))
				}
				waited := got[1].at.Sub(got[0].at)
				if waited < d || (s.v == nil && waited > d+5*time.Second) {
					t.Fatalf("came back after %v; delay %v", waited, d)
				}
				second := got[1]
				if second.attempt != 2 || second.headers["tenant"] != "acme" || second.headers[amqp.RetryCountHeader] != "1" ||
					second.raw.MessageId != "r-1" || second.raw.CorrelationId != "c-1" || second.raw.Expiration != "" {
					t.Fatalf("second delivery: attempt %d, headers %v, raw %+v", second.attempt, second.headers, second.raw)
				}
				if reason, from := death(second.raw.Headers); reason != "expired" || from != waiting {
					t.Fatalf("the returned copy's x-death: %q from %q", reason, from)
				}
				if n := r.ready(waiting) + r.ready(q) + r.ready(dead); n != 0 {
					t.Fatalf("%d messages left", n)
				}
				t.Logf("%s: came back after %v (delay %v)", s.name, waited, d)
			})
		})
	}
}

// The service stops while the copy waits in the waiting queue; a new service on the same
// queues processes it once it is due.
func TestDLXTTLSurvivesRestart(t *testing.T) {
	eachDelay(t, func(t *testing.T, s delayServer) {
		first := newDelayRig(t, s, nil, true)
		q, waiting := first.q("refunds"), first.q("refunds"+amqp.RetrySuffix)
		d := s.delay(time.Minute, 500*time.Millisecond)
		ep := endpointOf(t, first.broker, false, q, amqp.DLXTTL())
		var parkedAt time.Time // before the copy is published (its TTL starts when it is queued)
		subscribe(first, ep, func(context.Context, *core.Message[string]) error {
			parkedAt = time.Now()
			return core.RetryAfter(d)
		}, rawCodec)
		first.start()
		first.publish(q, "refund-1")
		first.rec.WaitSettled(1)
		first.stop()
		if n := first.ready(waiting); n != 1 {
			t.Fatalf("with the service stopped the waiting queue holds %d, want the copy", n)
		}

		second := newDelayRig(t, s, first.be, true)
		var j journal
		subscribe(second, endpointOf(t, second.broker, false, q, amqp.DLXTTL()), func(_ context.Context, m *core.Message[string]) error {
			j.add(s.clk(), m)
			return nil
		}, rawCodec)
		second.start()
		second.waitOpen(q)
		if s.v != nil {
			s.v.Advance(d)
		}
		second.rec.WaitSettled(1)
		got := j.of("refund-1")
		if len(got) != 1 || got[0].attempt != 2 {
			t.Fatalf("after the restart: %+v", got)
		}
		if s.v == nil && time.Since(parkedAt) < d {
			t.Fatalf("processed %v after parking, before the delay of %v", time.Since(parkedAt), d)
		}
	})
}

// Without a delay backend the copy waits in the process: the subscription says so when it
// opens, a stop during the delay loses the copy (logged), and nothing of it is left on the
// server for the next start.
func TestInProcessDelayLostOnRestart(t *testing.T) {
	eachDelay(t, func(t *testing.T, s delayServer) {
		first := newDelayRig(t, s, nil, true)
		q := first.q("refunds")
		d := s.delay(time.Minute, time.Minute)
		subscribe(first, endpointOf(t, first.broker, false, q), func(context.Context, *core.Message[string]) error { return core.RetryAfter(d) }, rawCodec)
		first.start()
		first.publish(q, "refund-1")
		first.rec.WaitSettled(1)
		warn := first.logs.Find("amqp: delayed retries (RetryAfter) of this subscription wait in the process: at-most-once, a copy still waiting when the service stops is lost; mount the queue with amqp.DLXTTL() or amqpdme to keep them on the server")
		if len(warn) != 1 || warn[0].Level != slog.LevelWarn || warn[0].Attrs["queue"] != q {
			t.Fatalf("start-up warning: %+v", warn)
		}
		first.stop()
		lost := first.logs.Find("in-process delay closed: delayed copies lost")
		if len(lost) != 1 || lost[0].Attrs["lost"] != int64(1) {
			t.Fatalf("loss log: %+v", lost)
		}
		if n := first.ready(q); n != 0 {
			t.Fatalf("the queue holds %d; the copy was only in the stopped process", n)
		}

		second := newDelayRig(t, s, first.be, true)
		subscribe(second, endpointOf(t, second.broker, false, q), func(context.Context, *core.Message[string]) error { return nil }, rawCodec)
		second.start()
		second.waitOpen(q)
		if s.v != nil {
			s.v.Advance(2 * d)
			if n := len(second.rec.Settlements()) + second.ready(q); n != 0 {
				t.Fatalf("the lost copy came back: %d", n)
			}
		}
	})
}

// A handler that always asks for a delay is stopped by the cap: classic and quorum queues, the
// copy reaching the cap goes to the dead letter with the final count (on a quorum queue the
// copy's server count starts over, so the transport moves it).
func TestDLXTTLCapStopsDelayedLoop(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			eachDelay(t, func(t *testing.T, s delayServer) {
				r := newDelayRig(t, s, nil, true)
				q, dead := r.q("payouts"), r.q("payouts.dead")
				r.q("payouts" + amqp.RetrySuffix)
				d := s.delay(10*time.Second, 100*time.Millisecond)
				subscribe(r, endpointOf(t, r.broker, k.quorum, q, amqp.DLXTTL()), func(context.Context, *core.Message[string]) error {
					return core.RetryAfter(d)
				}, rawCodec, core.DeadLetterAfter(3, dead))
				r.start()
				r.publish(q, "payout-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}))
				for i := 1; i < 3; i++ {
					r.rec.WaitSettled(i)
					if s.v != nil {
						s.v.Advance(d)
					}
				}
				got := r.drain(dead, 1)
				r.stop()
				if len(got) != 1 || got[0].Headers[amqp.RetryCountHeader] != "3" || got[0].Headers["tenant"] != "acme" || got[0].Headers["x-death"] != nil {
					t.Fatalf("dead letter %+v", got)
				}
				if n := len(r.rec.Settlements()); n != 3 {
					t.Fatalf("%d deliveries, want 3", n)
				}
			})
		})
	}
}

// A message delayed again and again through the same waiting queue is never taken for a
// dead-letter cycle (RabbitMQ drops a message whose x-death already names the target queue
// with only expiries in between): the copies carry no x-death forward.
func TestDLXTTLDelayedManyTimesNotDropped(t *testing.T) {
	for _, times := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("%dx", times), func(t *testing.T) {
			eachDelay(t, func(t *testing.T, s delayServer) {
				r := newDelayRig(t, s, nil, true)
				q := r.q("work")
				r.q("work" + amqp.RetrySuffix)
				d := s.delay(time.Second, 50*time.Millisecond)
				var j journal
				subscribe(r, endpointOf(t, r.broker, false, q, amqp.DLXTTL()), func(_ context.Context, m *core.Message[string]) error {
					j.add(s.clk(), m)
					if m.Attempt() <= times {
						return core.RetryAfter(d)
					}
					return nil
				}, rawCodec)
				r.start()
				r.publish(q, "m")
				for i := 1; i <= times; i++ {
					r.rec.WaitSettled(i)
					if s.v != nil {
						s.v.Advance(d)
					}
				}
				all := r.rec.WaitSettled(times + 1)
				if last := all[times]; last.Verdict.Action != core.ActAck || last.Delivery.Attempt() != times+1 {
					t.Fatalf("last settlement %v on attempt %d", last.Verdict, last.Delivery.Attempt())
				}
				if h := j.of("m")[times]; h.headers[amqp.RetryCountHeader] != fmt.Sprint(times) {
					t.Fatalf("last delivery's headers %v", h.headers)
				}
			})
		})
	}
}

// A waiting queue expires only at its head: a short delay parked behind a long one comes back
// with the long one. The figures in DLXTTL's documentation come from this test.
func TestDLXTTLLongDelayHoldsUpShorterOnes(t *testing.T) {
	eachDelay(t, func(t *testing.T, s delayServer) {
		r := newDelayRig(t, s, nil, true)
		q := r.q("refunds")
		waiting := r.q("refunds" + amqp.RetrySuffix)
		long, short := s.delay(60*time.Second, 1500*time.Millisecond), s.delay(5*time.Second, 200*time.Millisecond)
		var j journal
		subscribe(r, endpointOf(t, r.broker, false, q, amqp.DLXTTL()), func(_ context.Context, m *core.Message[string]) error {
			j.add(s.clk(), m)
			switch {
			case m.Attempt() > 1:
				return nil
			case m.Payload == "long":
				return core.RetryAfter(long)
			}
			return core.RetryAfter(short)
		}, rawCodec)
		r.start()
		r.publish(q, "long")
		r.rec.WaitSettled(1)
		r.publish(q, "short")
		r.rec.WaitSettled(2)
		if s.v != nil {
			s.v.Advance(short)
			if n := len(s.mem.Messages(waiting)); n != 2 {
				t.Fatalf("after the short delay the waiting queue holds %d, want both", n)
			}
			s.v.Advance(long - short)
		}
		r.rec.WaitSettled(4)
		sh := j.of("short")
		held := sh[1].at.Sub(sh[0].at)
		if held < long-short-50*time.Millisecond {
			t.Fatalf("the short copy came back after %v; behind a %v one it should wait about that long", held, long)
		}
		t.Logf("%s: a %v copy parked behind a %v one came back after %v", s.name, short, long, held)
	})
}

// Declaration off: a missing waiting queue stops the start naming it; once it exists the
// subscription starts.
func TestDLXTTLDeclareOffChecksWaitingQueue(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q, waiting := r.q("refunds"), r.q("refunds.retry.30s")
		r.declare(q, nil)
		ep, err := amqp.Classic(r.broker, q, amqp.DLXTTLNamed(waiting))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return nil })
		err = r.startErr()
		if !errors.Is(err, amqp.ErrNotFound) || !strings.Contains(err.Error(), waiting) {
			t.Fatalf("start error %v: want ErrNotFound naming %q", err, waiting)
		}
		t.Logf("%s: %v", s.name, err)

		r2 := newRig(t, s, false)
		r2.be = r.be
		r2.declare(waiting, amqp.WaitingQueue(waiting).Args(q))
		ep2, _ := amqp.Classic(r2.broker, q, amqp.DLXTTLNamed(waiting))
		subscribe(r2, ep2, func(context.Context, *core.Message[string]) error { return nil })
		r2.start()
		r2.waitOpen(q)
	})
}

func TestDelayOptionsRefused(t *testing.T) {
	b, err := amqp.New(amqp.URL(url))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"empty name", func() error { _, err := amqp.Classic(b, "q", amqp.DLXTTLNamed(" ")); return err }(), "empty"},
		{"itself", func() error { _, err := amqp.Classic(b, "q", amqp.DLXTTLNamed("q")); return err }(), "the queue itself"},
		{"reserved", func() error { _, err := amqp.Quorum(b, "q", amqp.DLXTTLNamed("amq.q")); return err }(), "reserved"},
		{"two delays", func() error { _, err := amqp.Classic(b, "q", amqp.DLXTTL(), amqp.DLXTTLNamed("w")); return err }(), "already has a delay"},
		{"nil delay", func() error { _, err := amqp.Classic(b, "q", amqp.WithDelay(nil)); return err }(), "WithDelay(nil)"},
		{"long derived name", func() error { _, err := amqp.Classic(b, strings.Repeat("q", 250), amqp.DLXTTL()); return err }(), "at most 255"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, c.err, c.want)
		}
	}
}

// DLXTTLNamed parks the copies in the named waiting queue, one per delay class: here a queue
// whose delays are all 5 s and one whose delays are all 60 s never hold each other up.
func TestDLXTTLNamedPerDelayClass(t *testing.T) {
	eachDelay(t, func(t *testing.T, s delayServer) {
		r := newDelayRig(t, s, nil, true)
		fast, slow := r.q("refunds.fast"), r.q("refunds.slow")
		fastWait, slowWait := r.q("retry.5s"), r.q("retry.60s")
		short, long := s.delay(5*time.Second, 200*time.Millisecond), s.delay(60*time.Second, 1500*time.Millisecond)
		var j journal
		for _, c := range []struct {
			q, waiting string
			d          time.Duration
		}{{slow, slowWait, long}, {fast, fastWait, short}} {
			subscribe(r, endpointOf(t, r.broker, false, c.q, amqp.DLXTTLNamed(c.waiting)), func(_ context.Context, m *core.Message[string]) error {
				j.add(s.clk(), m)
				if m.Attempt() == 1 {
					return core.RetryAfter(c.d)
				}
				return nil
			}, rawCodec)
		}
		r.start()
		r.publish(slow, "slow")
		r.rec.WaitSettled(1)
		r.publish(fast, "fast")
		r.rec.WaitSettled(2)
		if s.mem != nil {
			if len(s.mem.Messages(slowWait)) != 1 || len(s.mem.Messages(fastWait)) != 1 {
				t.Fatalf("waiting queues hold %d and %d", len(s.mem.Messages(slowWait)), len(s.mem.Messages(fastWait)))
			}
			s.v.Advance(short)
		}
		r.rec.WaitSettled(3)
		if got := j.of("fast"); len(got) != 2 || len(j.of("slow")) != 1 {
			t.Fatalf("after the short delay: fast seen %d times, slow %d", len(got), len(j.of("slow")))
		}
		f := j.of("fast")
		waited := f[1].at.Sub(f[0].at)
		if waited < short || (s.v == nil && waited >= long) {
			t.Fatalf("the 5s class came back after %v", waited)
		}
		t.Logf("%s: a %v copy in its own waiting queue came back after %v while a %v one waited", s.name, short, waited, long)
	})
}

// The in-process default on the same terms: no earlier than the delay, headers and properties
// kept, count raised; on a quorum queue too.
func TestInProcessDelayNoEarlierWithHeaders(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			eachDelay(t, func(t *testing.T, s delayServer) {
				r := newDelayRig(t, s, nil, true)
				q := r.q("refunds")
				d := s.delay(30*time.Second, 300*time.Millisecond)
				var j journal
				subscribe(r, endpointOf(t, r.broker, k.quorum, q), func(_ context.Context, m *core.Message[string]) error {
					j.add(s.clk(), m)
					if m.Attempt() == 1 {
						return core.RetryAfter(d)
					}
					return nil
				}, rawCodec, core.DeadLetterAfter(5, r.q("refunds.dead")))
				r.start()
				r.publish(q, "refund-1", amqp.WithHeaders(map[string]string{"tenant": "acme"}), amqp.WithMessageID("r-1"), amqp.WithCorrelationID("c-1"))
				r.rec.WaitSettled(1)
				if s.v != nil {
					s.v.Advance(d - time.Millisecond)
					if n := len(s.mem.Messages(q)) + len(r.rec.Settlements()); n != 1 {
						t.Fatalf("a millisecond before the delay: %d messages and settlements, want the first settlement only", n)
					}
					s.v.Advance(time.Millisecond)
				}
				r.rec.WaitSettled(2)
				got := j.of("refund-1")
				waited := got[1].at.Sub(got[0].at)
				if waited < d || (s.v == nil && waited > d+5*time.Second) {
					t.Fatalf("came back after %v; delay %v", waited, d)
				}
				second := got[1]
				if second.attempt != 2 || second.headers["tenant"] != "acme" || second.headers[amqp.RetryCountHeader] != "1" ||
					second.raw.MessageId != "r-1" || second.raw.CorrelationId != "c-1" {
					t.Fatalf("second delivery: attempt %d, headers %v, raw %+v", second.attempt, second.headers, second.raw)
				}
			})
		})
	}
}
