package amqp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/settlehq/settle/core"
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
