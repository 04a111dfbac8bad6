package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// A delayed copy held in the process is not lost when the broker cannot be reached at the
// moment it is due (a cut connection, a refused dial): its original was acknowledged when the
// copy was parked, so the copy stays in the process, is tried again after the Broker's
// CopyRetryBackoff, and reaches the queue once the broker is back (the fault suite's
// cut/classic+inprocess trial lost it).
func TestInProcessDelayedCopySurvivesConnectionLoss(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		var refuse atomic.Bool
		gated := s
		gated.dial = func() (amqp.Connection, error) {
			if refuse.Load() {
				return nil, errors.New("test: the broker is unreachable")
			}
			return s.dial()
		}
		retried := make(chan struct{}, 1)
		r := newRigLogging(t, gated, true, func(h slog.Handler) slog.Handler {
			return signal{h, "amqp: delayed copy not published back; it stays in the process and is tried again", retried}
		})
		q := r.q("refunds")
		ep, err := amqp.Classic(r.broker, q)
		if err != nil {
			t.Fatal(err)
		}
		const delay = time.Second
		subscribe(r, ep, func(_ context.Context, m *core.Message[string]) error {
			if m.Attempt() == 1 {
				return core.RetryAfter(delay)
			}
			return nil
		}, rawCodec)
		r.start()
		r.waitOpen(q)
		r.publish(q, "refund-1")
		parked := r.rec.WaitSettled(1)[0]
		if parked.Err != nil || parked.Verdict.Action != core.ActRetryAfter {
			t.Fatalf("first settlement: %+v", parked)
		}
		refuse.Store(true)
		s.kill()
		select {
		case <-retried:
		case <-time.After(delay + coretest.WaitTimeout):
			t.Fatal("the delayed copy's failed publish was not logged")
		}
		refuse.Store(false)
		all := r.rec.WaitFor(func(all []core.Settlement) bool {
			for _, st := range all {
				if st.Err == nil && st.Verdict.Action == core.ActAck {
					return true
				}
			}
			return false
		})
		last := all[len(all)-1]
		if last.Delivery.Attempt() != 2 || string(last.Delivery.Body()) != "refund-1" {
			t.Fatalf("the copy came back as attempt %d with %q", last.Delivery.Attempt(), last.Delivery.Body())
		}
		if st := r.broker.CopyStats(); st.Failed < 1 || st.Lost != 0 {
			t.Fatalf("copy stats %+v", st)
		}
		if lost := r.logs.Find("amqp: delayed copy lost: publishing it back failed and the broker is closed"); len(lost) != 0 {
			t.Fatalf("logged as lost: %+v", lost)
		}
	})
}
