package amqp_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// Issue 42, item 10: a classic queue's redelivered flag counts an attempt only for a delivery
// this process handed out. A message another consumer took and gave back unsettled (a crashed
// process, or RabbitMQ's recovery after an unclean stop, which flags every message it
// recovers) comes back flagged; its handler must still run each of the cap's attempts before
// the dead letter.
func TestClassicCountsOnlyRedeliveriesItHandedOut(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("flagged"), r.q("flagged.dead")
		r.declare(q, nil)
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{MessageId: "m", Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		// Another consumer takes it and dies with it: it is back, flagged redelivered. (The get
		// follows the publish on one channel, so the queue has it by then.)
		if _, ok, err := ch.Get(q, false); !ok || err != nil {
			t.Fatalf("get: %v %v", ok, err)
		}
		ch.Close()
		var mu sync.Mutex
		var attempts []int
		subscribe(r, endpointOf(t, r.broker, false, q), func(_ context.Context, m *core.Message[string]) error {
			mu.Lock()
			attempts = append(attempts, m.Attempt())
			mu.Unlock()
			return core.Retry()
		}, rawCodec, core.DeadLetterAfter(2, dead))
		r.start()
		r.waitOpen(q)
		dl := r.drain(dead, 1)
		r.stop()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(attempts, []int{1, 2}) {
			t.Fatalf("handler runs at attempts %v, want [1 2]", attempts)
		}
		info, ok, err := core.ParseDeadLetterInfo(stringHeaders(dl[0].Headers))
		if !ok || err != nil || info.Count != 2 || !strings.Contains(info.Error, "retry at attempt 2 of 2") {
			t.Fatalf("dead letter %+v (%v, %v)", info, ok, err)
		}
		if first := r.rec.WaitSettled(1)[0]; !first.Delivery.(*amqp.Delivery).Redelivered() {
			t.Errorf("the first delivery is not flagged redelivered; the case proves nothing")
		}
	})
}
