package amqp_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// A quorum queue without a cap and without a dead-letter route discards a message returned past
// its delivery limit (RabbitMQ 4's default limit applies to every quorum queue, and settle
// declares it on 3.x too). Settle cannot keep that message, but it must not lose it silently:
// the start says so (WARN), and the return that the server turns into a discard is an ERROR line
// with the queue, message id and attempt, and an EventDiscarded for the metrics.
func TestQuorumDiscardAtLimitIsNotSilent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare bool
		limit   int
	}{
		{"declared by settle (default limit)", true, amqp.DefaultDeliveryLimit},
		{"declared elsewhere (limit 2)", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				r := newRig(t, s, tc.declare)
				q := r.q("jobs")
				if !tc.declare {
					r.declare(q, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(tc.limit)})
				}
				ep, err := amqp.Quorum(r.broker, q)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var counts []int
				subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
					mu.Lock()
					counts = append(counts, m.Delivery().(*amqp.QuorumDelivery).RedeliveryCount())
					mu.Unlock()
					return core.Retry()
				}, rawCodec)
				r.start()
				r.publish(q, "job-1")
				var e core.Event
				select {
				case e = <-r.discarded:
				case <-time.After(coretest.WaitTimeout):
					t.Fatalf("no discarded event; deliveries seen %v", counts)
				}
				if e.Attempt != tc.limit+1 || e.Queue != q || e.Err == nil {
					t.Fatalf("event %+v, want attempt %d on %q", e, tc.limit+1, q)
				}
				// The server discards it: nothing comes back, the queue is empty.
				r.rec.WaitSettled(tc.limit + 1)
				if n := len(r.drain(q, 0)); n != 0 {
					t.Fatalf("the queue still holds %d", n)
				}
				r.stop()
				mu.Lock()
				if len(counts) != tc.limit+1 || counts[len(counts)-1] != tc.limit {
					t.Fatalf("x-delivery-count per delivery %v, want 0..%d", counts, tc.limit)
				}
				mu.Unlock()
				warn := r.logs.Find(discardWarning)
				if len(warn) != 1 || warn[0].Level != slog.LevelWarn || fmt.Sprint(warn[0].Attrs["delivery_limit"]) != fmt.Sprint(tc.limit) {
					t.Fatalf("start warning %+v", warn)
				}
				errs := r.logs.Find("amqp: message returned past the quorum queue's delivery limit is discarded by the server (no dead-letter route)")
				if len(errs) != 1 || errs[0].Level != slog.LevelError || errs[0].Attrs["queue"] != q ||
					fmt.Sprint(errs[0].Attrs["attempt"]) != fmt.Sprint(tc.limit+1) || errs[0].Attrs["message_id"] == "" {
					t.Fatalf("error lines %+v", errs)
				}
			})
		})
	}
}

// With a dead-letter route the same loop ends in the route, and nothing is reported discarded.
func TestQuorumLimitWithRouteIsNotDiscard(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("jobs"), r.q("jobs.spent")
		r.declare(dead, nil)
		ep, err := amqp.Quorum(r.broker, q, amqp.DeadLetterExchange("", dead), amqp.DeliveryLimit(2))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return core.Retry() }, rawCodec)
		r.start()
		r.publish(q, "job-1")
		got := r.drain(dead, 1)
		r.stop()
		if len(got) != 1 || string(got[0].Body) != "job-1" {
			t.Fatalf("route holds %v", got)
		}
		select {
		case e := <-r.discarded:
			t.Fatalf("discarded reported with a route: %+v", e)
		default:
		}
		if n := len(r.logs.Find("amqp: message returned past the quorum queue's delivery limit is discarded by the server (no dead-letter route)")); n != 0 {
			t.Fatalf("%d discard errors with a route", n)
		}
	})
}
