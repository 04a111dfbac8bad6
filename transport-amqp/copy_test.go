package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// fill publishes (confirmed) long-lived messages to queue until it refuses one.
func (r *rig) fill(queue string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	for range 5 {
		err := amqp.Publish(ctx, r.broker, "", queue, "filler", amqp.WithConfirm(), amqp.WithPayloadCodec(core.Raw))
		if errors.Is(err, amqp.ErrNotConfirmed) {
			return
		}
		if err != nil {
			r.t.Fatalf("fill %q: %v", queue, err)
		}
	}
	r.t.Fatalf("queue %q never refused a publishing", queue)
}

// Issue 15, defect 1: a quorum queue's RetryAfter copy that its waiting queue refuses (full,
// x-overflow reject-publish) is not reported settled and the original is not acknowledged: it
// is held back and returned, and once the waiting queue takes copies again the copy goes
// through and comes back.
func TestQuorumWaitingQueueFullKeepsOriginal(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, false)
		q := r.q("payouts")
		waiting := r.q("payouts" + amqp.RetrySuffix)
		r.declare(q, amqp091.Table{"x-queue-type": "quorum"})
		args := amqp.WaitingQueue("").Args(q)
		args["x-max-length"] = int64(1)
		args["x-overflow"] = "reject-publish"
		r.declare(waiting, args)
		ep, err := amqp.Quorum(r.broker, q, amqp.DLXTTL())
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			if m.Headers()[amqp.RetryCountHeader] == "" {
				return core.RetryAfter(50 * time.Millisecond) // the original
			}
			return nil // the copy, back from the waiting queue
		}, rawCodec)
		r.start()
		r.fill(waiting)
		r.publish(q, "m")
		got := r.rec.WaitSettled(1)
		if got[0].Verdict.Action != core.ActRetryAfter || !errors.Is(got[0].Err, amqp.ErrNotConfirmed) {
			t.Fatalf("first settlement %v: %v, want a refused copy", got[0].Verdict, got[0].Err)
		}
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueuePurge(waiting, false); err != nil {
			t.Fatal(err)
		}
		ch.Close()
		r.rec.WaitFor(func(all []core.Settlement) bool {
			last := all[len(all)-1]
			return last.Err == nil && last.Verdict.Action == core.ActAck && last.Delivery.Headers()[amqp.RetryCountHeader] != ""
		})
		r.stop()
		if n := len(r.drain(q, 0)) + len(r.drain(waiting, 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
		if st := r.broker.CopyStats(); st.Refused < 1 || st.Published != 1 {
			t.Fatalf("copy stats %+v", st)
		}
	})
}

// Issue 15, defect 2: a dead letter deleted while the service runs does not swallow copies:
// published mandatory, they are returned, the original is held back and returned, and reaches
// the dead letter once it exists again — on classic and quorum queues.
func TestDeadLetterDeletedCopiesReturned(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			each(t, func(t *testing.T, s server) {
				r := newRig(t, s, true)
				q, dead := r.q("work"), r.q("work.dead")
				subscribe(r, endpointOf(t, r.broker, k.quorum, q), func(context.Context, *core.Message[string]) error {
					return core.Retry()
				}, rawCodec, core.DeadLetterAfter(2, dead))
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
					if len(all) == 0 {
						return false
					}
					last := all[len(all)-1]
					return last.Verdict.Action == core.ActDeadLetter && errors.Is(last.Err, amqp.ErrUnroutable)
				})
				r.declare(dead, nil)
				dl := r.drain(dead, 1)
				r.stop()
				if len(dl) != 1 || string(dl[0].Body) != "m" {
					t.Fatalf("dead letter %v", dl)
				}
				if st := r.broker.CopyStats(); st.Returned < 1 || st.Lost != 0 {
					t.Fatalf("copy stats %+v", st)
				}
				if n := r.refused.Load(); n < 1 {
					t.Fatalf("%d copy_refused events reported, want at least one", n)
				}
			})
		})
	}
}

// Issue 15, defect 3: FireAndForget is an explicit opt-in whose loss is no longer silent: a
// copy returned after its original was acknowledged is counted as lost and logged.
func TestFireAndForgetReturnedCopyCountedLost(t *testing.T) {
	const lost = "amqp: a copy was returned unroutable after its original was acknowledged (PublishWith(FireAndForget)): the message is lost"
	each(t, func(t *testing.T, s server) {
		logged := make(chan struct{}, 1)
		r := newRigLogging(t, s, true, func(h slog.Handler) slog.Handler { return signal{h, lost, logged} })
		q, dead := r.q("work"), r.q("work.dead")
		ep, err := amqp.Classic(r.broker, q, amqp.PublishWith(amqp.FireAndForget))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return core.Retry() }, rawCodec, core.DeadLetterAfter(1, dead))
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
		r.rec.WaitSettled(1)
		select {
		case <-logged:
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("the lost copy was not logged")
		}
		r.stop()
		if st := r.broker.CopyStats(); st.Lost != 1 || st.Published != 1 {
			t.Fatalf("copy stats %+v", st)
		}
		if n := len(r.drain(q, 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
	})
}

// Issue 42, item 5: under FireAndForget a copy the broker refuses (a full dead-letter queue
// under x-overflow reject-publish: a nack) after its original was acknowledged is lost like an
// unroutable one, and counted (CopyStats.Lost) and logged like it.
func TestFireAndForgetRefusedCopyCountedLost(t *testing.T) {
	const lost = "amqp: a copy was refused (nack) after its original was acknowledged (PublishWith(FireAndForget)): the message is lost"
	each(t, func(t *testing.T, s server) {
		logged := make(chan struct{}, 1)
		r := newRigLogging(t, s, true, func(h slog.Handler) slog.Handler { return signal{h, lost, logged} })
		q, dead := r.q("work"), r.q("work.dead")
		r.declare(dead, amqp091.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"})
		ep, err := amqp.Classic(r.broker, q, amqp.PublishWith(amqp.FireAndForget))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(context.Context, *core.Message[string]) error { return core.Retry() }, rawCodec, core.DeadLetterAfter(1, dead))
		r.start()
		r.waitOpen(q)
		r.fill(dead)
		r.publish(q, "m")
		r.rec.WaitSettled(1)
		select {
		case <-logged:
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("the refused copy was not logged")
		}
		r.stop()
		if st := r.broker.CopyStats(); st.Lost != 1 || st.Published != 1 {
			t.Fatalf("copy stats %+v, want 1 published, 1 lost", st)
		}
		if l := r.logs.Find(lost); len(l) != 1 || l[0].Attrs["message_id"] == nil {
			t.Errorf("error lines %v, want one naming the message", l)
		}
		if n := len(r.drain(q, 0)); n != 0 {
			t.Fatalf("%d messages left", n)
		}
	})
}

// Publish under WithConfirm is mandatory: a message no queue takes is an error, not a silent
// drop (the outbox relay's copies rely on it).
func TestPublishConfirmedUnroutableRefused(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
		defer cancel()
		err := amqp.Publish(ctx, r.broker, "", r.q("nowhere"), "m", amqp.WithConfirm())
		var re *amqp.ReturnError
		if !errors.Is(err, amqp.ErrUnroutable) || !errors.As(err, &re) || re.Code != amqp091.NoRoute {
			t.Fatalf("publish to no queue: %v", err)
		}
	})
}

// signal is a log handler that also signals, once, when a record with message msg is handled.
type signal struct {
	slog.Handler
	msg string
	ch  chan struct{}
}

func (s signal) Handle(ctx context.Context, r slog.Record) error {
	err := s.Handler.Handle(ctx, r)
	if r.Message == s.msg {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
	return err
}

func (s signal) WithAttrs(a []slog.Attr) slog.Handler {
	return signal{s.Handler.WithAttrs(a), s.msg, s.ch}
}
func (s signal) WithGroup(g string) slog.Handler { return signal{s.Handler.WithGroup(g), s.msg, s.ch} }

// Issue 23 item 1, the AMQP equivalent of a settlement that keeps failing: a quorum message
// whose RetryAfter copy is returned again and again (its waiting queue was deleted) is held
// back between deliveries (never an immediate loop), each return spends an attempt, so the cap
// ends the loop, the failure is logged once per interval with how many were not, and the other
// messages keep flowing meanwhile.
func TestRefusedCopyLoopEndsAtCapOthersFlow(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		r := newRig(t, s, true)
		q, dead := r.q("loop"), r.q("loop.dead")
		waiting := r.q("loop" + amqp.RetrySuffix)
		ep, err := amqp.Quorum(r.broker, q, amqp.DLXTTL(), amqp.Prefetch(10))
		if err != nil {
			t.Fatal(err)
		}
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			if m.Payload == "poison" {
				return core.RetryAfter(time.Minute)
			}
			return nil
		}, rawCodec, core.DeadLetterAfter(3, dead), core.Workers(2))
		r.start()
		r.waitOpen(q)
		ch, err := r.be.conn().Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(waiting, false, false, false); err != nil {
			t.Fatal(err)
		}
		ch.Close()
		r.publish(q, "poison")
		for i := range 20 {
			r.publish(q, strconv.Itoa(i))
		}
		dl := r.drain(dead, 1)
		all := r.rec.WaitFor(func(all []core.Settlement) bool {
			n, moved := 0, false
			for _, st := range all {
				if st.Err == nil && st.Verdict.Action == core.ActAck {
					n++
				}
				moved = moved || (st.Err == nil && st.Verdict.Action == core.ActDeadLetter)
			}
			return n == 20 && moved
		})
		r.stop()
		if len(dl) != 1 || string(dl[0].Body) != "poison" {
			t.Fatalf("dead letter %v", dl)
		}
		info, ok, err := core.ParseDeadLetterInfo(stringHeaders(dl[0].Headers))
		if !ok || err != nil || info.Count != 3 || !strings.Contains(info.Error, "retry_after(1m0s) at attempt 3 of 3") {
			t.Fatalf("dead letter info %+v (%v, %v)", info, ok, err)
		}
		var poison []core.Settlement
		for _, st := range all {
			if string(st.Delivery.Body()) == "poison" {
				poison = append(poison, st)
			}
		}
		// Two returned copies (attempts 1 and 2, each held back, then returned, spending an
		// attempt), then at attempt 3 the cap turns the handler's RetryAfter into the move.
		if len(poison) != 3 || !errors.Is(poison[0].Err, amqp.ErrUnroutable) || !errors.Is(poison[1].Err, amqp.ErrUnroutable) ||
			poison[2].Verdict.Action != core.ActDeadLetter || poison[2].Err != nil {
			t.Fatalf("poison settlements %v", poison)
		}
		if n := len(r.logs.Find("amqp: a copy was not taken by the broker; its original is held back, then returned to the queue")); n != 1 {
			t.Errorf("%d error lines for 2 returned copies within 10s, want 1", n)
		}
	})
}
