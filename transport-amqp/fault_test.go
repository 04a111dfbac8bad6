package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

func endpointOf(t *testing.T, b *amqp.Broker, quorum bool, q string, opts ...amqp.QueueOption) core.Endpoint {
	t.Helper()
	var ep core.Endpoint
	var err error
	if quorum {
		qo := make([]amqp.QuorumOption, len(opts))
		for i, o := range opts {
			qo[i] = o
		}
		ep, err = amqp.Quorum(b, q, qo...)
	} else {
		co := make([]amqp.ClassicOption, len(opts))
		for i, o := range opts {
			co[i] = o
		}
		ep, err = amqp.Classic(b, q, co...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// The connection is killed twice while 220 messages are worked by four workers, and a reader
// on the dead letter acknowledges what reaches it: the service recovers by itself (the last 20
// messages are published after the second kill), and the ledger shows every message in exactly
// one final state (acknowledged, dropped, or read from the dead letter), none lost. A message
// reaches its final state twice only where the kill returned it (it was redelivered, or its
// settlement failed): an acknowledgement written just before the socket dies is lost with it,
// which AMQP cannot detect, so it is at-least-once.
func TestConnectionKilledMidRunRecovers(t *testing.T) {
	const total, extra, dlEvery, dropEvery = 200, 20, 10, 7
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				r := newRig(t, s, true)
				q, dead := r.q("ledger"), r.q("ledger.dead")
				ep := endpointOf(t, r.broker, k.quorum, q, amqp.Prefetch(20))
				var callsMu sync.Mutex
				calls := map[string]int{}
				// The handler of message 50, and then of 120, holds its delivery until the
				// connection has been killed under it.
				entered, killed, published := make(chan int), make(chan struct{}), make(chan struct{})
				var gates sync.Map
				subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
					<-published
					callsMu.Lock()
					calls[m.Payload]++
					callsMu.Unlock()
					i, _ := strconv.Atoi(m.Payload)
					if i == 50 || i == 120 {
						if _, seen := gates.LoadOrStore(i, true); !seen {
							entered <- i
							<-killed
						}
					}
					switch {
					case i%dlEvery == 0:
						return core.Retry()
					case i%dropEvery == 0:
						return core.Drop()
					case i%3 == 0 && m.Attempt() == 1:
						return core.Retry()
					}
					return nil
				}, rawCodec, core.Workers(4), core.DeadLetterAfter(3, dead))
				subscribe(r, endpointOf(t, r.broker, false, dead), func(context.Context, *core.Message[string]) error {
					return nil
				}, rawCodec, core.Name("dead-reader"))
				r.start()
				for i := 1; i <= total; i++ {
					r.publish(q, strconv.Itoa(i))
				}
				close(published)
				// fresh waits until n deliveries of a channel opened after the kill have settled.
				fresh := func(epoch uint64, n int) {
					r.rec.WaitFor(func(all []core.Settlement) bool {
						c := 0
						for _, st := range all {
							if st.Err == nil && st.Queue == q && amqp.Epoch(st.Delivery) > epoch {
								c++
							}
						}
						return c >= n
					})
				}
				var missing []string
				t.Cleanup(func() {
					if t.Failed() {
						for _, rec := range r.logs.Records(slog.LevelInfo) {
							if strings.HasPrefix(rec.Message, "amqp:") {
								t.Logf("log: %s %v", rec.Message, rec.Attrs)
							}
						}
						if s.info != nil {
							t.Logf("queue %s; dead letter %s", s.info(q), s.info(dead))
						}
						t.Logf("messages without a final state: %v; %d in the queue", missing, len(r.drain(q, 0)))
						for _, b := range missing {
							for _, st := range r.rec.Settlements() {
								if string(st.Delivery.Body()) == b {
									t.Logf("  %s: attempt %d epoch %d queue %s: %v err=%v", b, st.Delivery.Attempt(), amqp.Epoch(st.Delivery), st.Queue, st.Verdict, st.Err)
								}
							}
						}
					}
				})
				<-entered
				s.kill()
				killed <- struct{}{}
				fresh(1, 10)
				<-entered
				s.kill()
				killed <- struct{}{}
				for i := total + 1; i <= total+extra; i++ {
					r.publish(q, strconv.Itoa(i))
				}

				// final: acknowledged or dropped from the queue, or read from the dead letter.
				final := func(st core.Settlement) bool {
					return st.Err == nil && (st.Queue == dead || st.Verdict.Action == core.ActAck || st.Verdict.Action == core.ActDrop)
				}
				r.rec.WaitFor(func(all []core.Settlement) bool {
					done := map[string]bool{}
					for _, st := range all {
						if final(st) {
							done[string(st.Delivery.Body())] = true
						}
					}
					missing = missing[:0]
					for i := 1; i <= total+extra; i++ {
						if !done[strconv.Itoa(i)] {
							missing = append(missing, strconv.Itoa(i))
						}
					}
					return len(missing) == 0
				})
				r.stop()
				all := r.rec.Settlements()

				finals, returned, inDead, settledMain := map[string]int{}, map[string]bool{}, map[string]int{}, map[string]int{}
				pastCap := map[string]int{} // moved without a handler call: delivered past the cap, never settled
				for _, st := range all {
					body := string(st.Delivery.Body())
					if final(st) {
						finals[body]++
					}
					if st.Queue == dead {
						inDead[body]++
						continue
					}
					settledMain[body]++
					var de *core.DeadLetterError
					if errors.As(st.Verdict.Cause, &de) && de.NotSettled {
						pastCap[body]++
					}
					if st.Err != nil || st.Delivery.(interface{ Redelivered() bool }).Redelivered() {
						returned[body] = true
					}
				}
				dups := 0
				for i := 1; i <= total+extra; i++ {
					b := strconv.Itoa(i)
					if n := finals[b]; n != 1 {
						dups += n - 1
						if !returned[b] {
							t.Errorf("message %s reached a final state %d times without being returned", b, n)
						}
					}
					if i%dlEvery == 0 && inDead[b] == 0 {
						t.Errorf("message %s never reached the dead letter", b)
					}
					if i%dlEvery != 0 && inDead[b] > 0 && !returned[b] && !k.quorum {
						// A quorum queue also counts the returns of deliveries that were
						// prefetched but never handed out, which the ledger cannot see.
						t.Errorf("message %s reached the dead letter without being returned", b)
					}
					if calls[b] != settledMain[b]-pastCap[b] {
						t.Errorf("message %s: %d handler calls, %d settlements", b, calls[b], settledMain[b])
					}
				}
				if n := len(r.drain(q, 0)) + len(r.drain(dead, 0)); n != 0 {
					t.Errorf("queues still hold %d messages", n)
				}
				reconnects := len(r.logs.Find("amqp: consuming again"))
				t.Logf("%s: %d settlements, %d messages returned by the kills, %d reached their final state twice, %d consumer reconnections",
					s.name, len(all), len(returned), dups, reconnects)
			})
		})
	}
}

// countingConn counts the acknowledgement frames sent on its channels.
type countingConn struct {
	amqp.Connection
	acks, multiple *atomic.Int64
}

func (c countingConn) Channel() (amqp.Channel, error) {
	ch, err := c.Connection.Channel()
	if err != nil {
		return nil, err
	}
	return countingChannel{ch, c.acks, c.multiple}, nil
}

type countingChannel struct {
	amqp.Channel
	acks, multiple *atomic.Int64
}

func (c countingChannel) Ack(tag uint64, multiple bool) error {
	c.acks.Add(1)
	if multiple {
		c.multiple.Add(1)
	}
	return c.Channel.Ack(tag, multiple)
}

// Four workers acknowledge 300 messages with far fewer frames: contiguous settled tags go out
// as one multiple acknowledgement. (A worker descheduled on a low tag makes the others' tags go
// out one by one once half a batch waits above it, so the bound is loose: typically 13
// frames, under the race detector up to about 110.)
func TestAcknowledgementsCoalesce(t *testing.T) {
	const total = 300
	// A wide window: under a loaded machine the 2 ms default can pass between any two
	// handlers, and this test is about ranges formed by batch size, not about timing.
	defer amqp.SetFlushInterval(time.Second)()
	each(t, func(t *testing.T, s server) {
		var acks, multiple atomic.Int64
		dial := s.dial
		s.dial = func() (amqp.Connection, error) {
			c, err := dial()
			if err != nil {
				return nil, err
			}
			return countingConn{c, &acks, &multiple}, nil
		}
		r := newRig(t, s, true)
		q := r.q("acks")
		// Published before the subscription starts, so the consumer is busy rather than idle.
		r.declare(q, nil)
		for i := range total {
			r.publish(q, strconv.Itoa(i))
		}
		var mu sync.Mutex
		subscribe(r, endpointOf(t, r.broker, false, q, amqp.Prefetch(100)), func(context.Context, *core.Message[string]) error {
			// The handlers pass through one at a time, in any order.
			mu.Lock()
			//lint:ignore SA2001 the critical section is the point: one handler at a time
			mu.Unlock()
			return nil
		}, rawCodec, core.Workers(4))
		r.start()
		r.rec.WaitSettled(total)
		r.stop()
		if n := len(r.drain(q, 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
		if acks.Load() >= total/2 || multiple.Load() == 0 {
			t.Fatalf("%d acknowledgement frames (%d multiple) for %d messages", acks.Load(), multiple.Load(), total)
		}
		t.Logf("%s: %d acknowledgement frames (%d multiple) for %d messages", s.name, acks.Load(), multiple.Load(), total)
	})
}

// Under the Confirmed policy (the default) a copy RabbitMQ refuses (the dead letter is full and
// rejects publishes) leaves the original unacknowledged: it is held back, then returned — not
// requeued at once in a loop — and it is not lost. Coming back past its cap, it goes to the dead
// letter again without its handler; a copy published while the dead letter is missing is
// returned unroutable and held back too; once the dead letter takes publishes again the message
// arrives there. The failures are counted and logged at most once per interval.
func TestConfirmedCopyNackedKeepsOriginal(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("confirmed"), r.q("confirmed.dead")
		r.declare(dead, amqp091.Table{"x-max-length": int64(0), "x-overflow": "reject-publish"})
		ep, err := amqp.Classic(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			calls.Add(1)
			return core.Retry() // at the cap of 1: a dead-letter copy, refused
		}, rawCodec, core.DeadLetterAfter(1, dead))
		r.start()
		r.publish(q, "m")
		got := r.rec.WaitFor(func(all []core.Settlement) bool { return len(all) >= 3 })
		for i, st := range got[:3] {
			if st.Verdict.Action != core.ActDeadLetter || !errors.Is(st.Err, amqp.ErrNotConfirmed) {
				t.Fatalf("settlement %d: %v: %v, want an unconfirmed dead letter", i, st.Verdict, st.Err)
			}
		}
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(dead, false, false, false); err != nil {
			t.Fatal(err)
		}
		// The dead letter is missing for a while: copies are returned unroutable.
		r.rec.WaitFor(func(all []core.Settlement) bool {
			return errors.Is(all[len(all)-1].Err, amqp.ErrUnroutable)
		})
		ch.Close()
		r.declare(dead, nil) // the dead letter takes publishes again
		dl := r.drain(dead, 1)
		r.stop()
		if len(dl) != 1 || string(dl[0].Body) != "m" {
			t.Fatalf("dead letter %v", dl)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("handler called %d times; the returned message is past its cap", n)
		}
		if n := len(r.drain(q, 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
		all := r.rec.Settlements()
		// Held back between returns: far fewer deliveries than an immediate requeue loop
		// makes (thousands a second), bounded by the doubling wait of 20ms..200ms.
		if len(all) > 60 {
			t.Errorf("%d settlements: the refused copy was not held back", len(all))
		}
		st := r.broker.CopyStats()
		if st.Refused < 3 || st.Returned < 1 || st.Published != 1 || st.Lost != 0 {
			t.Errorf("copy stats %+v", st)
		}
		if logs := r.logs.Find("amqp: a copy was not taken by the broker; its original is held back, then returned to the queue"); len(logs) < 1 || len(logs) > 2 {
			t.Errorf("%d error lines for %d refused copies, want one per 10s", len(logs), st.Refused+st.Returned)
		}
		t.Logf("%s: %d settlements, copy stats %+v", s.name, len(all), st)
	})
}

// Under the Confirmed policy a confirmed copy counts: retries below the cap and the dead
// letter at it, on both brokers.
func TestConfirmedCopiesReachDeadLetter(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("confirmed"), r.q("confirmed.dead")
		ep, err := amqp.Classic(r.broker, q, amqp.PublishWith(amqp.Confirmed))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return core.Retry() }, rawCodec, core.DeadLetterAfter(3, dead))
		r.start()
		r.publish(q, "m")
		got := r.drain(dead, 1)
		r.stop()
		if len(got) != 1 || got[0].Headers[amqp.RetryCountHeader] != "3" {
			t.Fatalf("dead letter %v", got)
		}
		for _, st := range r.rec.Settlements() {
			if st.Err != nil {
				t.Fatalf("settlement %v failed: %v", st.Verdict, st.Err)
			}
		}
	})
}
