package amqptest_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// ttlAccepted is RabbitMQ 3.10's rule for a per-message expiration: the broker reads it with
// Erlang's list_to_integer (an optional sign, then decimal digits) and takes values from 0 to
// MaxTTL ms; anything else closes the publishing channel with PRECONDITION_FAILED. An empty
// expiration is none.
func ttlAccepted(s string) bool {
	if s == "" {
		return true
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	n, ok := new(big.Int).SetString(s, 10)
	return ok && n.Sign() >= 0 && n.Cmp(big.NewInt(amqptest.MaxTTL)) <= 0
}

// FuzzTTLArguments holds amqptest to the broker's limits on expirations and x-message-ttl:
// a value is refused exactly when RabbitMQ refuses it, and an accepted one expires the message
// no sooner than it says (never at once through an overflow).
func FuzzTTLArguments(f *testing.F) {
	for _, s := range []string{"", "0", "5000", "007", "+5", "-5", "--5", "+", " 5", "5 ", "0x10",
		"315360000000", "315360000001", "4294967295", "4294967296", "9223372036855",
		"9223372036854775807", "9223372036854775808", "99999999999999999999", "-0", "١"} {
		f.Add(s, int64(len(s))*1000)
	}
	f.Add("1000", int64(-1))
	f.Add("1000", int64(amqptest.MaxTTL+1))
	f.Add("1000", int64(9223372036855))
	f.Fuzz(func(t *testing.T, expiration string, queueTTL int64) {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := clock.NewVirtual(start)
		b := amqptest.NewBroker(clk)
		conn, err := b.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.QueueDeclare("ttl", false, false, false, false, amqp091.Table{"x-message-ttl": queueTTL})
		if want := queueTTL >= 0 && queueTTL <= amqptest.MaxTTL; want != (err == nil) {
			t.Fatalf("x-message-ttl %d: declare error %v, RabbitMQ would accept it: %v", queueTTL, err, want)
		}
		if err != nil {
			return
		}
		if _, err := ch.QueueDeclare("q", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "q", false, false,
			amqp091.Publishing{Body: []byte("x"), Expiration: expiration})
		refused := err != nil
		if !refused {
			select {
			case e := <-closes:
				refused = e != nil && e.Code == amqp091.PreconditionFailed
				if e != nil && !refused {
					t.Fatalf("expiration %q: channel closed with %v", expiration, e)
				}
			default:
				if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
					t.Fatalf("expiration %q: not confirmed (%v, %v)", expiration, ok, err)
				}
			}
		}
		if want := ttlAccepted(expiration); want == refused {
			t.Fatalf("expiration %q: refused=%v, RabbitMQ accepts it: %v", expiration, refused, want)
		}
		if refused || expiration == "" {
			return
		}
		n, _ := new(big.Int).SetString(expiration, 10)
		if ms := n.Int64(); ms > 0 {
			clk.Advance(time.Duration(ms-1) * time.Millisecond)
			if got := len(b.Messages("q")); got != 1 {
				t.Fatalf("expiration %q: the message is gone 1 ms early", expiration)
			}
		}
	})
}
