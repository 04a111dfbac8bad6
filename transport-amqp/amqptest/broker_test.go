package amqptest_test

import (
	"context"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

func TestRequeueOrder(t *testing.T) {
	for _, c := range []struct{ typ, want string }{
		// classic: back to the original position; quorum: to the back, behind what is ready.
		{"classic", "1 2 3"},
		{"quorum", "2 1 3"},
	} {
		t.Run(c.typ, func(t *testing.T) {
			parity(t, func(t *testing.T, e *env) {
				q := e.q("q")
				e.declare(e.ch(), q, amqp091.Table{"x-queue-type": c.typ})
				e.publish("", q, amqp091.Publishing{Body: []byte("1")})
				e.publish("", q, amqp091.Publishing{Body: []byte("2")})
				ch := e.ch()
				d, ok, err := ch.Get(q, false)
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				if err := d.Reject(true); err != nil {
					t.Fatal(err)
				}
				e.publish("", q, amqp091.Publishing{Body: []byte("3")})
				got := ""
				for range 3 {
					d, ok, err := ch.Get(q, true)
					if err != nil || !ok {
						t.Fatal(ok, err)
					}
					got += " " + string(d.Body)
				}
				if got[1:] != c.want {
					t.Errorf("order %q, want %q", got[1:], c.want)
				}
			})
		})
	}
}

func TestDeadLetterRoutingKeyNeedsExchange(t *testing.T) {
	parity(t, func(t *testing.T, e *env) {
		q := e.q("q")
		_, err := e.ch().QueueDeclare(q, false, false, false, false, amqp091.Table{"x-dead-letter-routing-key": "x"})
		ae, ok := err.(*amqp091.Error)
		if !ok || ae.Code != amqp091.PreconditionFailed {
			t.Fatalf("err = %v, want 406", err)
		}
		if want := "PRECONDITION_FAILED - invalid arg 'x-dead-letter-routing-key' for queue '" + q + "' in vhost '" + e.vhost + "': routing_key_but_no_dlx_defined"; ae.Reason != want {
			t.Errorf("reason %q, want %q", ae.Reason, want)
		}
	})
}

func newBroker(t *testing.T) (*clock.Virtual, *amqptest.Broker) {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return clk, amqptest.NewBroker(clk)
}

func TestDelayedMessageExchange(t *testing.T) {
	clk, b := newBroker(t)
	conn, _ := b.Dial()
	ch, _ := conn.Channel()
	if err := ch.ExchangeDeclare("delays", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("work", "work", "delays", false, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int32{5000, 1000} { // the long one first: the short one must not wait
		if err := ch.PublishWithContext(context.Background(), "delays", "work", false, false,
			amqp091.Publishing{Body: []byte{byte(d / 1000)}, Headers: amqp091.Table{"x-delay": d}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Held("delays"); n != 2 {
		t.Fatalf("held %d, want 2", n)
	}
	clk.Advance(999 * time.Millisecond)
	if n := len(b.Messages("work")); n != 0 {
		t.Fatalf("%d released before 1s", n)
	}
	clk.Advance(time.Millisecond)
	m := b.Messages("work")
	if len(m) != 1 || m[0].Body[0] != 1 || m[0].Headers["x-delay"] != int32(-1000) {
		t.Fatalf("after 1s: %+v", m)
	}
	clk.Advance(4 * time.Second)
	if m := b.Messages("work"); len(m) != 2 || m[1].Body[0] != 5 {
		t.Fatalf("after 5s: %+v", m)
	}

	// Without the plugin the exchange type is unknown: the server closes the connection.
	clk2 := clock.NewVirtual(time.Unix(0, 0))
	noPlugin := amqptest.NewBroker(clk2, amqptest.WithoutDelayedMessagePlugin())
	conn, _ = noPlugin.Dial()
	ch, _ = conn.Channel()
	err := ch.ExchangeDeclare("delays", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"})
	if ae, ok := err.(*amqp091.Error); !ok || ae.Code != amqp091.CommandInvalid || !conn.IsClosed() {
		t.Fatalf("without the plugin: %v, connection closed %v", err, conn.IsClosed())
	}
}

func TestCloseAllConnections(t *testing.T) {
	_, b := newBroker(t)
	conn, _ := b.Dial()
	ch, _ := conn.Channel()
	connClosed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_, _ = ch.QueueDeclare("q", true, false, false, false, nil)
	_ = ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("m")})
	deliveries, _ := ch.Consume("q", "", false, false, false, false, nil)
	<-deliveries
	if info, _ := b.Queue("q"); info.Unacked != 1 {
		t.Fatalf("unacked = %d", info.Unacked)
	}
	b.CloseAllConnections()
	for _, c := range []chan *amqp091.Error{chClosed, connClosed} {
		if err := <-c; err == nil || err.Code != amqp091.ConnectionForced {
			t.Errorf("NotifyClose got %v, want 320", err)
		}
		if _, open := <-c; open {
			t.Error("listener not closed")
		}
	}
	if _, open := <-deliveries; open {
		t.Error("delivery channel not closed")
	}
	m := b.Messages("q")
	if len(m) != 1 || !m[0].Redelivered {
		t.Fatalf("after close: %+v", m)
	}
	if _, err := conn.Channel(); err != amqp091.ErrClosed {
		t.Errorf("Channel on a closed connection: %v", err)
	}
}

func TestExpiryCycleIsDropped(t *testing.T) {
	clk, b := newBroker(t)
	conn, _ := b.Dial()
	ch, _ := conn.Channel()
	_, _ = ch.QueueDeclare("c", false, false, false, false, amqp091.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "d"})
	_, _ = ch.QueueDeclare("d", false, false, false, false, amqp091.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c"})
	_ = ch.PublishWithContext(context.Background(), "", "c", false, false, amqp091.Publishing{})
	clk.Advance(30 * time.Millisecond)
	if len(b.Messages("d")) != 1 {
		t.Fatal("not moved to d")
	}
	clk.Advance(30 * time.Millisecond)
	if len(b.Messages("c"))+len(b.Messages("d")) != 0 {
		t.Fatal("an all-expiry dead-letter cycle must drop the message, as RabbitMQ does")
	}
}
