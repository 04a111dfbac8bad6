package amqp

import (
	"slices"
	"testing"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

func heldDelivery(body string, suspect bool) core.Delivery {
	return &Delivery{raw: amqp091.Delivery{Body: []byte(body)}, suspect: suspect}
}

func popAll(q *held) []string {
	var out []string
	for d := q.pop(); d != nil; d = q.pop() {
		out = append(out, string(base(d).raw.Body))
	}
	return out
}

// Suspect deliveries go out first, each kind in the order received; the queue's memory is
// reused rather than growing with the deliveries that passed through it.
func TestHeldHandsOutSuspectsFirst(t *testing.T) {
	var q held
	for _, d := range []core.Delivery{
		heldDelivery("c1", false), heldDelivery("c2", false), heldDelivery("s1", true),
		heldDelivery("c3", false), heldDelivery("s2", true),
	} {
		q.push(d)
	}
	if got, want := popAll(&q), []string{"s1", "s2", "c1", "c2", "c3"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}
	if q.pop() != nil || q.len() != 0 {
		t.Fatal("an empty queue handed something out")
	}

	// Interleaved: one taken, one received, as Next runs in a steady state.
	q.push(heldDelivery("a", false))
	var got []string
	for i := range 10_000 {
		q.push(heldDelivery("x", i%1000 == 999))
		d := q.pop()
		got = append(got, string(base(d).raw.Body))
	}
	if got[0] != "a" || cap(q.buf) > 64 {
		t.Fatalf("first %q, capacity %d after 10,000 deliveries through a queue of 1–2", got[0], cap(q.buf))
	}

	q.reset()
	q.push(heldDelivery("c", false))
	q.push(heldDelivery("s", true))
	q.reset()
	if q.pop() != nil || q.suspects != 0 {
		t.Fatal("reset left deliveries or suspects behind")
	}
}
