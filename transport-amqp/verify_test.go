package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// The arguments of a queue declared elsewhere are read back without declaring anything: every
// argument RabbitMQ compares, and the queue type; a missing queue is not created.
func TestQueueArgumentsReadWithoutDeclaring(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		quorum, classic, plain, missing := r.q("quorum"), r.q("classic"), r.q("plain"), r.q("missing")
		qa := amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(7), "x-dead-letter-exchange": "",
			"x-dead-letter-routing-key": "elsewhere", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
			"x-max-length": int64(100), "x-message-ttl": int64(60000)}
		r.declare(quorum, qa)
		ca := amqp091.Table{"x-message-ttl": int64(1000), "x-max-length": int64(3), "x-dead-letter-exchange": "dlx", "x-queue-mode": "lazy"}
		r.declare(classic, ca)
		r.declare(plain, nil)
		if err := r.broker.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer r.broker.Close()
		for _, c := range []struct {
			name string
			want amqp091.Table
		}{{quorum, qa}, {classic, ca}, {plain, amqp091.Table{}}} {
			got, err := amqp.QueueArguments(r.broker, c.name, true)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			want := amqp091.Table{"x-queue-type": "classic"}
			for k, v := range c.want {
				want[k] = v
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: read %v, want %v", c.name, got, want)
			}
		}
		if _, err := amqp.QueueArguments(r.broker, missing, true); err == nil {
			t.Fatal("a missing queue reported arguments")
		}
		if n := len(r.drain(missing, 0)); n != 0 {
			t.Fatal("the missing queue was created")
		}
		if _, err := r.be.conn().Channel(); err != nil {
			t.Fatal(err)
		}
	})
}

// Issue 15 defect 7: without declaring, a descriptor of the other type than the queue's is
// refused at start, naming both (it was accepted, and a Quorum descriptor on a classic queue
// logged a delivery limit the queue does not have); nothing is declared by the check.
func TestDeclareOffQueueTypeVerified(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		for _, c := range []struct {
			name      string
			args      amqp091.Table
			quorum    bool
			problem   string
			mountedAs string
		}{
			{"classic-as-quorum", nil, true, "is a classic queue", "amqp.Quorum"},
			{"quorum-as-classic", amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)}, false, "is a quorum queue", "amqp.Classic"},
		} {
			r := newRig(t, s, false)
			q := r.q(c.name)
			r.declare(q, c.args)
			subscribe(r, endpointOf(t, r.broker, c.quorum, q), func(context.Context, *core.Message[string]) error { return nil })
			err := r.startErr()
			var te *amqp.TopologyError
			if !errors.As(err, &te) || !errors.Is(err, amqp.ErrMismatch) || te.Name != q ||
				!strings.Contains(err.Error(), c.problem) || !strings.Contains(err.Error(), c.mountedAs) {
				t.Fatalf("%s: start error %v", c.name, err)
			}
			if limitLogs(r) != 0 {
				t.Errorf("%s: a delivery limit was logged for a subscription that did not start", c.name)
			}
			t.Logf("%s: %v", s.name, err)
		}
		// The right descriptor starts, and logs the limit the queue has.
		r := newRig(t, s, false)
		q := r.q("quorum-ok")
		r.declare(q, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)})
		subscribe(r, endpointOf(t, r.broker, true, q), func(context.Context, *core.Message[string]) error { return nil })
		r.start()
		r.waitOpen(q)
		recs := r.logs.Find(discardWarning)
		if len(recs) != 1 || fmt.Sprint(recs[0].Attrs["delivery_limit"]) != "3" || limitLogs(r) != 1 {
			t.Fatalf("log records %+v", recs)
		}
	})
}

// The start-up lines that say what a quorum queue without a cap does at its delivery limit.
const discardWarning = "amqp: quorum queue without a cap or a dead-letter route; the server discards a message returned past its delivery limit (each is logged as an error); give the subscription core.DeadLetterAfter or the queue a dead-letter route"

func limitLogs(r *rig) int {
	return len(r.logs.Find(discardWarning)) +
		len(r.logs.Find("amqp: quorum queue without a cap; the server dead-letters a message returned past its delivery limit through the queue's dead-letter route")) +
		len(r.logs.Find("amqp: quorum queue without a cap, declared elsewhere with no delivery limit settle can read; the server dead-letters or discards a message after its limit, if it has one"))
}

// Issue 15 defect 8: the in-process delay warning is logged only for a subscription that
// starts.
func TestInProcessDelayWarningOnlyWhenStarted(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		const warning = "amqp: delayed retries (RetryAfter) of this subscription wait in the process: at-most-once, a copy still waiting when the service stops is lost; mount the queue with amqp.DLXTTL() or amqpdme to keep them on the server"
		r := newRig(t, s, false)
		subscribe(r, endpointOf(t, r.broker, false, r.q("absent")), func(context.Context, *core.Message[string]) error { return nil })
		if err := r.startErr(); !errors.Is(err, amqp.ErrNotFound) {
			t.Fatalf("start error %v", err)
		}
		if n := len(r.logs.Find(warning)); n != 0 {
			t.Fatalf("%d in-process delay warnings for a subscription that did not start", n)
		}
		r2 := newRig(t, s, true)
		q := r2.q("present")
		subscribe(r2, endpointOf(t, r2.broker, false, q), func(context.Context, *core.Message[string]) error { return nil })
		r2.start()
		r2.waitOpen(q)
		if n := len(r2.logs.Find(warning)); n != 1 {
			t.Fatalf("%d in-process delay warnings for a subscription that started", n)
		}
	})
}

// Issue 25: without declaring, a waiting queue declared elsewhere without at-least-once
// dead-lettering (a classic one, as settle declared them before) is refused at start, naming
// the queue, what it lacks and how to fix it; with DeclareTopology(true) the same queue is
// refused by the server, with the same advice.
func TestWaitingQueueWithoutAtLeastOnceRefused(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q, waiting := r.q("refunds"), r.q("refunds"+amqp.RetrySuffix)
		r.declare(q, nil)
		r.declare(waiting, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q})
		subscribe(r, endpointOf(t, r.broker, false, q, amqp.DLXTTL()), func(context.Context, *core.Message[string]) error { return nil })
		err := r.startErr()
		var te *amqp.TopologyError
		if !errors.As(err, &te) || te.Name != waiting || !errors.Is(err, amqp.ErrMismatch) {
			t.Fatalf("start error %v", err)
		}
		for _, want := range []string{"x-queue-type=quorum (has classic)", "x-dead-letter-strategy=at-least-once (has none)", "x-overflow=reject-publish (has none)", "delete it once its copies have gone home"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
		r2 := newRig(t, s, true)
		r2.be = r.be
		subscribe(r2, endpointOf(t, r2.broker, false, q, amqp.DLXTTL()), func(context.Context, *core.Message[string]) error { return nil })
		err = r2.startErr()
		if !errors.As(err, &te) || te.Name != waiting || !strings.Contains(err.Error(), "delete this one once its copies have gone home") {
			t.Fatalf("declaring: start error %v", err)
		}
		t.Logf("%s: %v", s.name, err)
	})
}
