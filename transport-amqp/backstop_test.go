package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// Issue 42, item 2: on a quorum queue every original settle returns after a refused copy spends
// a delivery. With the delivery limit at the cap, two refused dead-letter copies (a leader
// election, a deleted or full dead-letter queue) were enough for the server to move the message
// itself, with x-death and no count or reason. The limit is the cap plus amqp.BackstopMargin:
// settle keeps moving the message itself, and its dead letter carries its count and reason.
func TestQuorumBackstopOutlastsRefusedCopies(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("payouts"), r.q("payouts.dead")
		const cap, refusals = 2, 4
		subscribe(r, endpointOf(t, r.broker, true, q), func(context.Context, *core.Message[string]) error {
			return core.Retry()
		}, rawCodec, core.DeadLetterAfter(cap, dead))
		r.start()
		r.waitOpen(q)
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(dead, false, false, false); err != nil {
			t.Fatal(err)
		}
		ch.Close()
		r.publish(q, "m")
		r.rec.WaitFor(func(all []core.Settlement) bool {
			n := 0
			for _, st := range all {
				if st.Verdict.Action == core.ActDeadLetter && errors.Is(st.Err, amqp.ErrUnroutable) {
					n++
				}
			}
			return n >= refusals
		})
		r.declare(dead, nil)
		dl := r.drain(dead, 1)
		r.stop()
		info, ok, err := core.ParseDeadLetterInfo(stringHeaders(dl[0].Headers))
		if !ok || err != nil || info.Count < cap || info.Error == "" {
			t.Fatalf("dead letter headers %v: %+v (%v, %v); want settle's count and reason, not only the server's x-death", dl[0].Headers, info, ok, err)
		}
		if args := s.args(t, q); !hasArg(args, "x-delivery-limit", strconv.Itoa(cap+amqp.BackstopMargin)) {
			t.Errorf("queue arguments %s: want x-delivery-limit %d", args, cap+amqp.BackstopMargin)
		}
	})
}

// hasArg reports whether args, as server.args renders them (amqptest's map, rabbitmqctl's
// list), hold key with the integer value v.
func hasArg(args, key, v string) bool {
	return strings.Contains(args, key+":"+v+" ") || strings.Contains(args, key+":"+v+"]") ||
		strings.Contains(args, `{"`+key+`",`+v+`}`)
}

// Issue 42, item 2: a dead letter the server moved at a quorum queue's delivery limit carries
// x-death and no settle-retry-count of its own making (only the count of an earlier copy, if
// any): the operations view shows its count — the copies before it plus the deliveries the
// queue counted, from the queue's delivery limit — and why it died. Here a quorum queue without
// a cap, with its own dead-letter route and DeliveryLimit(2): the message waits once (a copy with
// settle-retry-count 1), then is retried until RabbitMQ 3.10 moves it after 3 deliveries.
func TestOpsServerMovedDeadLetterCounts(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("payouts"), r.q("payouts.dead")
		r.declare(dead, nil)
		ep, err := amqp.Quorum(r.broker, q, amqp.DLXTTL(), amqp.DeadLetterExchange("", dead), amqp.DeliveryLimit(2))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			if m.Headers()[amqp.RetryCountHeader] == "" {
				return core.RetryAfter(time.Millisecond)
			}
			return core.Retry()
		}, rawCodec)
		r.start()
		r.publish(q, "m", amqp.WithMessageID("moved-1"))
		r.rec.WaitSettled(4) // the delayed retry, then three requeues
		o, err := amqp.NewOps(context.Background(), r.be.conn(), q, dead)
		if err != nil {
			t.Fatal(err)
		}
		r.await(dead, 1)
		d, err := o.GetDead(context.Background(), "moved-1")
		r.stop()
		if err != nil {
			t.Fatal(err)
		}
		if d.Count != 1+3 || d.Origin != q || d.DeadAt.IsZero() || !strings.Contains(d.Reason, "delivery limit") || !strings.Contains(d.Reason, q) {
			t.Errorf("server-moved dead letter: count %d, origin %q, dead at %v, reason %q; want 4 (1 copy + 3 deliveries), %q, a time, the delivery limit",
				d.Count, d.Origin, d.DeadAt, d.Reason, q)
		}
	})
}

// await waits until queue has n messages, taking them without acknowledging them and giving them
// back (their channel closes): their redelivered flag is set, nothing else changes.
func (r *rig) await(queue string, n int) {
	r.t.Helper()
	ch, err := r.be.conn().Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	defer ch.Close()
	dl, err := ch.Consume(queue, "await", false, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("await %q: %v", queue, err)
	}
	timeout := time.After(coretest.WaitTimeout)
	for range n {
		select {
		case <-dl:
		case <-timeout:
			r.t.Fatalf("queue %q: fewer than %d messages after %v", queue, n, coretest.WaitTimeout)
		}
	}
}

// pastLimit is the log line of an original that passed its quorum queue's delivery limit after
// a refused copy.
const pastLimit = "amqp: a copy was not taken by the broker and its original, returned, passed the quorum queue's delivery limit: RabbitMQ dead-letters it itself; while the dead-letter route refuses it too, RabbitMQ keeps it in the queue, not ready and out of every consumer's sight, and tries again later (amqp.Ops counts it as dead-lettering with amqp.OpsCounts)"

// Issue 42, item 2: when the dead-letter queue stays deleted, every delivery of a message at its
// cap refuses its copy and spends a delivery, until its return passes the quorum queue's
// delivery limit: RabbitMQ then dead-letters it itself, at-least-once, to the same missing
// queue, and keeps it in the queue — not ready, not delivered, invisible — until the queue is
// back. settle says so (an ERROR line, CopyStats.ServerMoved), not "returned to the queue", and
// the operations view counts it as dead-lettering where it can count it (OpsCounts: amqptest, or
// the management plugin); once the dead-letter queue is back and the server moved it (amqptest at
// once; RabbitMQ after minutes), its dead letter shows its count and why.
func TestQuorumPastLimitIsReported(t *testing.T) {
	each(t, func(t *testing.T, s server) { pastLimitCase(t, s) })
}

func pastLimitCase(t *testing.T, s server) {
	logged := make(chan struct{}, 1)
	r := newRigLogging(t, s, true, func(h slog.Handler) slog.Handler { return signal{h, pastLimit, logged} })
	q, dead := r.q("payouts"), r.q("payouts.dead")
	const cap = 1
	subscribe(r, endpointOf(t, r.broker, true, q), func(context.Context, *core.Message[string]) error {
		return core.Retry()
	}, rawCodec, core.DeadLetterAfter(cap, dead))
	r.start()
	r.waitOpen(q)
	ch, err := r.be.conn().Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(dead, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	r.publish(q, "m", amqp.WithMessageID("past-1"))
	select {
	case <-logged:
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("no line %q", pastLimit)
	}
	if st := r.broker.CopyStats(); st.ServerMoved != 1 || st.Returned != cap+amqp.BackstopMargin+1 {
		t.Errorf("copy stats %+v: want 1 moved by the server after %d returned copies", st, cap+amqp.BackstopMargin+1)
	}
	if n := len(r.logs.Find("amqp: a copy was not taken by the broker; its original is held back, then returned to the queue")); n != 1 {
		t.Errorf("%d lines saying the original returns to the queue, want 1 (the first refusal; the others within 10 s are counted)", n)
	}
	checkDeadLettering(t, r, s, q)
	if s.real {
		return // RabbitMQ's dead-letter worker tries again after minutes
	}
	r.declare(dead, nil)
	r.await(dead, 1)
	d, err := amqp.NewOps(context.Background(), r.be.conn(), q, dead)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.GetDead(context.Background(), "past-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != cap+amqp.BackstopMargin+1 || !strings.Contains(got.Reason, "delivery limit") {
		t.Errorf("dead letter: count %d, reason %q; want %d deliveries at the delivery limit", got.Count, got.Reason, cap+amqp.BackstopMargin+1)
	}
}

// TestQuorumPastLimitCountedByTheManagementAPI runs pastLimitCase on a RabbitMQ node of the
// test's own with the management plugin, whose API (amqp.ManagementAPI) counts the message the
// quorum queue is dead-lettering: the queue's messages less its ready and unacknowledged ones.
func TestQuorumPastLimitCountedByTheManagementAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a RabbitMQ node with the management plugin (~15 s)")
	}
	const port = 5698
	ns := startNodes(t, 1, port, "settle-amqp-m", "rabbitmq_management")
	counts, err := amqp.ManagementAPI("http://guest:guest@127.0.0.1:"+strconv.Itoa(port+10000), "/")
	if err != nil {
		t.Fatal(err)
	}
	pastLimitCase(t, server{name: "rabbitmq-management", dial: amqp.URL(ns.urls[0]), counts: counts, real: true})
}

// checkDeadLettering checks the operations view of queue q, holding one message the server is
// dead-lettering: counted as dead-lettering, not ready, where the server's counts can be read
// (s.counts); reported unmeasured where they cannot.
func checkDeadLettering(t *testing.T, r *rig, s server, q string) {
	t.Helper()
	var opts []amqp.OpsOption
	if s.counts != nil {
		opts = append(opts, amqp.OpsCounts(s.counts))
	}
	o, err := amqp.NewOps(context.Background(), r.be.conn(), q, "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := o.Stats(context.Background())
	switch {
	case err != nil:
		t.Fatal(err)
	case s.counts == nil:
		if st.Measured(ops.FigureDeadLettering) {
			t.Errorf("without a counter: dead-lettering measured (%d); want it unmeasured, with why", st.DeadLettering)
		}
	default:
		// The management plugin publishes its figures once per statistics interval (500 ms on
		// the test's node) and says nothing when it does: the figure is read again each tick.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(coretest.WaitTimeout)
		for st.DeadLettering != 1 && s.real {
			select {
			case <-tick.C:
			case <-timeout:
				t.Fatalf("stats %+v: the management API never counted the message as dead-lettering", st)
			}
			if st, err = o.Stats(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if st.Ready != 0 || st.DeadLettering != 1 || !st.Measured(ops.FigureDeadLettering) {
			t.Errorf("stats %+v: want the message counted as dead-lettering, not ready", st)
		}
	}
}
