package amqptest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// confirmed publishes p mandatory on a channel in confirm mode and reports the confirmation
// and the return that came before it, if any.
func (e *env) confirmed(exchange, key string, p amqp091.Publishing) (ack bool, ret *amqp091.Return) {
	e.t.Helper()
	ch := e.ch()
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		e.t.Fatal(err)
	}
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false, p)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ack, err = dc.WaitContext(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	select {
	case r := <-returns:
		ret = &r
	default:
	}
	return ack, ret
}

// A mandatory publishing that reaches no queue is returned with 312 NO_ROUTE before its
// (positive) confirmation; one that reaches a queue is not returned.
func TestMandatoryReturn(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, nil)
		ack, ret := e.confirmed("", e.q("nowhere"), amqp091.Publishing{Body: []byte("lost"), MessageId: "m-1"})
		if !ack || ret == nil || ret.ReplyCode != amqp091.NoRoute || ret.ReplyText != "NO_ROUTE" ||
			string(ret.Body) != "lost" || ret.MessageId != "m-1" {
			t.Fatalf("unroutable: ack %v, return %+v", ack, ret)
		}
		if ack, ret := e.confirmed("", q, amqp091.Publishing{Body: []byte("kept")}); !ack || ret != nil {
			t.Fatalf("routed: ack %v, return %+v", ack, ret)
		}
	})
}

// x-overflow reject-publish nacks what a full queue refuses: a classic queue is full at
// x-max-length ready messages, a quorum queue only above it.
func TestRejectPublishNacks(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			typ  string
			max  int64
			want string
		}{
			{"classic", 0, "[false false false]"}, {"classic", 1, "[true false false]"},
			{"quorum", 0, "[true false false]"}, {"quorum", 1, "[true true false]"},
		} {
			q := e.q(fmt.Sprintf("%s-%d", c.typ, c.max))
			e.declare(e.ch(), q, amqp091.Table{"x-queue-type": c.typ, "x-max-length": c.max, "x-overflow": "reject-publish"})
			var got []bool
			for range 3 {
				ack, ret := e.confirmed("", q, amqp091.Publishing{Body: []byte("m")})
				if ret != nil {
					t.Errorf("%s max %d: returned %+v; a refused publishing is nacked, not returned", c.typ, c.max, ret)
				}
				got = append(got, ack)
			}
			if fmt.Sprint(got) != c.want {
				t.Errorf("%s with x-max-length %d: confirmations %v, want %s", c.typ, c.max, got, c.want)
			}
		}
	})
}

// The default overflow drops the oldest ready message, dead-lettering it with reason maxlen.
func TestDropHeadDeadLetters(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q, dead := e.q("q"), e.q("dead")
		ch := e.ch()
		e.declare(ch, dead, nil)
		e.declare(ch, q, amqp091.Table{"x-max-length": int64(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
		e.publish("", q, amqp091.Publishing{Body: []byte("first")})
		e.publish("", q, amqp091.Publishing{Body: []byte("second")})
		d := recv(t, e.consume(ch, dead))
		if string(d.Body) != "first" {
			t.Fatalf("dead letter %q, want the head", d.Body)
		}
		deaths, _ := d.Headers["x-death"].([]any)
		if len(deaths) != 1 || deaths[0].(amqp091.Table)["reason"] != "maxlen" {
			t.Fatalf("x-death %v", d.Headers["x-death"])
		}
		if n := e.ready(q); n != 1 {
			t.Fatalf("queue holds %d, want 1", n)
		}
	})
}

// RabbitMQ 3.10 takes per-message expirations and x-message-ttl up to ten years
// (amqptest.MaxTTL ms) and refuses larger ones with {value_too_large,N}: a publishing closes
// its channel, a declaration is refused.
func TestTTLUpperBound(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		e.declare(e.ch(), q, nil)
		for _, exp := range []string{fmt.Sprint(amqptest.MaxTTL), "4294967296"} {
			if ack, _ := e.confirmed("", q, amqp091.Publishing{Expiration: exp}); !ack {
				t.Errorf("expiration %s refused", exp)
			}
		}
		for _, exp := range []string{fmt.Sprint(amqptest.MaxTTL + 1), "9223372036855", "99999999999999999999"} {
			ch := e.ch()
			closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
			if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{Expiration: exp}); err != nil {
				t.Fatal(err)
			}
			err := closeErr(t, closes)
			// RabbitMQ's formatting breaks a long term over lines.
			reason := strings.Join(strings.Fields(err.Reason), "")
			if err.Code != amqp091.PreconditionFailed || !strings.Contains(reason, "{value_too_large,"+exp+"}") {
				t.Errorf("expiration %s: %v", exp, err)
			}
		}
		if _, err := e.ch().QueueDeclare(e.q("ten-years"), false, true, false, false, amqp091.Table{"x-message-ttl": int64(amqptest.MaxTTL)}); err != nil {
			t.Errorf("x-message-ttl %d: %v", amqptest.MaxTTL, err)
		}
		_, err := e.ch().QueueDeclare(e.q("too-long"), false, true, false, false, amqp091.Table{"x-message-ttl": int64(amqptest.MaxTTL + 1)})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("{value_too_large,%d}", amqptest.MaxTTL+1)) {
			t.Errorf("x-message-ttl above the bound: %v", err)
		}
	})
}

// x-dead-letter-strategy is a quorum queue's argument: at-most-once or at-least-once; classic
// queues refuse it, and it takes part in the equivalence of a redeclaration.
func TestDeadLetterStrategyArgument(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		alo := amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-dead-letter-exchange": ""}
		q := e.q("alo")
		e.declare(e.ch(), q, alo)
		for _, c := range []struct {
			name string
			args amqp091.Table
			want string
		}{
			{"classic", amqp091.Table{"x-dead-letter-strategy": "at-least-once"}, "of queue type rabbit_classic_queue"},
			{"bogus", amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-strategy": "bogus"}, "invalid_dlx_strategy"},
			{"type", amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-strategy": int32(1)}, "{unacceptable_type,signedint}"},
			{"overflow", amqp091.Table{"x-overflow": "bogus"}, "invalid_overflow"},
		} {
			_, err := e.ch().QueueDeclare(e.q(c.name), true, false, false, false, c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
			}
		}
		_, err := e.ch().QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-overflow": "reject-publish"})
		if err == nil || !strings.Contains(err.Error(), "inequivalent arg 'x-dead-letter-strategy'") {
			t.Errorf("redeclared without the strategy: %v", err)
		}
	})
}

// Measured on RabbitMQ 3.10.8: a quorum queue dead-lettering at-least-once keeps a dead letter
// its destination refuses (the dead-letter queue missing or full): it is no longer ready (a
// passive declaration counts 0), not delivered, but counted in the management API's messages,
// and the queue's dead-letter worker moves it once the destination takes it (on a timer of
// minutes; amqptest after the next operation). At-most-once, it is dropped.
func TestAtLeastOnceKeepsWhatItsDestinationRefuses(t *testing.T) {
	for _, strategy := range []string{"at-least-once", "at-most-once"} {
		t.Run(strategy, func(t *testing.T) {
			_, b := newBroker(t)
			conn, err := b.Dial()
			if err != nil {
				t.Fatal(err)
			}
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			q, dead := "work", "work.dead"
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(0),
				"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead, "x-dead-letter-strategy": strategy, "x-overflow": "reject-publish"}); err != nil {
				t.Fatal(err)
			}
			if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
			m, ok, err := ch.Get(q, false)
			if !ok || err != nil {
				t.Fatalf("get: %v %v", ok, err)
			}
			if err := ch.Reject(m.DeliveryTag, true); err != nil { // past the limit: dead-lettered, to no queue
				t.Fatal(err)
			}
			info, _ := b.Queue(q)
			kept := strategy == "at-least-once"
			if info.Ready != 0 || (info.DeadLettering == 1) != kept {
				t.Fatalf("after the move to a missing queue: %+v", info)
			}
			if _, err := ch.QueueDeclare(dead, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			info, _ = b.Queue(q)
			d, _ := b.Queue(dead)
			if info.DeadLettering != 0 || (d.Ready == 1) != kept {
				t.Fatalf("once the dead-letter queue exists: %+v, dead-letter queue %+v", info, d)
			}
		})
	}
}
