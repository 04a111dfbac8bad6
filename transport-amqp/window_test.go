package amqp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// A poison message that crashes its consumer (its channel closes with the deliveries it held)
// charges its later crashes to itself alone: after a crash the consumer takes one delivery at a
// time while they are suspect, and the returned poison comes back first, so its neighbours —
// prefetched behind it under Prefetch(10) when it first crashed — are charged that first crash
// only, and the cap at claim dead-letters the poison and nothing else. Before the window, every
// crash returned the whole prefetch, the quorum queue charged each neighbour a delivery, and
// after three crashes they were dead-lettered as "not settled".
func TestPoisonCrashChargesOnlyItself(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("window"), r.q("window.dead")
		ep, err := amqp.Quorum(r.broker, q, amqp.Prefetch(10))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		attempts := map[string][]int{}
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			mu.Lock()
			attempts[m.Payload] = append(attempts[m.Payload], m.Attempt())
			mu.Unlock()
			if m.Payload == "poison" {
				// The process dies: its channel closes with every delivery it held.
				if err := amqp.CloseChannel(m.Delivery()); err != nil {
					t.Errorf("close channel: %v", err)
				}
			}
			return nil
		}, rawCodec, core.DeadLetterAfter(3, dead), core.Workers(1))
		r.start()
		r.publish(q, "poison")
		for i := range 9 {
			r.publish(q, fmt.Sprintf("m%d", i))
		}
		got := r.drain(dead, 1)
		r.rec.WaitFor(func(ss []core.Settlement) bool {
			acks := 0
			for _, st := range ss {
				if st.Err == nil && st.Verdict.Action == core.ActAck {
					acks++
				}
			}
			return acks >= 9
		})
		r.stop()
		if n := len(got); n != 1 || string(got[0].Body) != "poison" {
			var bodies []string
			for _, d := range got {
				bodies = append(bodies, string(d.Body))
			}
			t.Fatalf("dead letters %v, want the poison alone", bodies)
		}
		if c, _ := got[0].Headers[amqp.RetryCountHeader].(string); c != "4" ||
			!strings.Contains(fmt.Sprint(got[0].Headers[core.HeaderError]), "not settled") {
			t.Errorf("poison's dead letter: count %q, error %v", c, got[0].Headers[core.HeaderError])
		}
		if t.Failed() {
			for _, rec := range r.logs.Records(-8) {
				t.Logf("%v %s %v", rec.Level, rec.Message, rec.Attrs)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if a := fmt.Sprint(attempts["poison"]); a != "[1 2 3]" {
			t.Errorf("poison ran at attempts %s, want [1 2 3]", a)
		}
		for i := range 9 {
			a := attempts[fmt.Sprintf("m%d", i)]
			if len(a) == 0 || a[len(a)-1] > 2 {
				t.Errorf("neighbour m%d ran at attempts %v, want its last at 1 or 2: charged for the poison's later crashes", i, a)
			}
		}
	})
}

// watchConn forwards every delivery its channels' consumers receive, and then names its body on
// arrived: once a body is named, the consumer can take that delivery without waiting.
type watchConn struct {
	amqp.Connection
	arrived chan<- string
}

func (c watchConn) Channel() (amqp.Channel, error) {
	ch, err := c.Connection.Channel()
	if err != nil {
		return nil, err
	}
	return watchChannel{ch, c.arrived}, nil
}

type watchChannel struct {
	amqp.Channel
	arrived chan<- string
}

func (c watchChannel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	in, err := c.Channel.Consume(queue, consumer, autoAck, exclusive, noLocal, noWait, args)
	if err != nil {
		return nil, err
	}
	out := make(chan amqp091.Delivery, 64)
	go func() {
		defer close(out)
		for m := range in {
			out <- m
			c.arrived <- string(m.Body)
		}
	}()
	return out, nil
}

// A message a crash returned into a consumer's open window, behind clean deliveries the
// consumer had prefetched, is handed out ahead of them: it waits only for the handler already
// running, not for the whole window, so a crash of this consumer meanwhile is less likely to
// charge it a second delivery no handler saw. Here the subscription holds c0 in its handler (on
// the consumer the window opened from) and c1, c2, c3 in its full window of 3, while another
// client takes "s" with basic.get and closes its channel (a crash: the quorum queue charges
// it). "s" arrives once c1 is acknowledged, while c2 runs, and goes out before c3.
func TestSuspectHandedOutBeforePrefetched(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		arrived := make(chan string, 64)
		dial := s.dial
		s.dial = func() (amqp.Connection, error) {
			c, err := dial()
			if err != nil {
				return nil, err
			}
			return watchConn{c, arrived}, nil
		}
		waitArrived := func(body string) {
			t.Helper()
			timeout := time.After(coretest.WaitTimeout)
			for {
				select {
				case b := <-arrived:
					if b == body {
						return
					}
				case <-timeout:
					t.Fatalf("%q never reached the consumer", body)
				}
			}
		}
		r := newRig(t, s, true)
		q := r.q("suspect-first")
		ep, err := amqp.Quorum(r.broker, q, amqp.Prefetch(3))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		started, release := make(chan struct{}), make(chan struct{})
		sArrived := make(chan struct{})
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			mu.Lock()
			order = append(order, fmt.Sprintf("%s#%d", m.Payload, m.Attempt()))
			mu.Unlock()
			switch m.Payload {
			case "c0":
				close(started)
				<-release
			case "c2":
				<-sArrived
			}
			return nil
		}, rawCodec, core.Workers(1))
		r.start()
		r.publish(q, "c0")
		<-started
		waitArrived("c0")
		for _, c := range []string{"c1", "c2", "c3"} {
			r.publish(q, c)
			waitArrived(c)
		}
		// The window (3) is full: "s" stays in the queue until c1 is acknowledged.
		r.publish(q, "s")
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := ch.Get(q, false)
		if err != nil || !ok || string(got.Body) != "s" {
			t.Fatalf("basic.get: %q, %v, %v", got.Body, ok, err)
		}
		if err := ch.Close(); err != nil { // "s" goes back, charged a delivery
			t.Fatal(err)
		}
		close(release)
		waitArrived("s")
		close(sArrived)
		r.rec.WaitFor(func(ss []core.Settlement) bool { return len(ss) >= 5 })
		r.stop()
		mu.Lock()
		defer mu.Unlock()
		if got, want := strings.Join(order, " "), "c0#1 c1#1 c2#1 s#2 c3#1"; got != want {
			t.Fatalf("handled %s, want %s", got, want)
		}
	})
}
