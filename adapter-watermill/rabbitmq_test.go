package settlewatermill_test

import (
	"log/slog"
	"testing"

	"github.com/rabbitmq/amqp091-go"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

const amqpDefault = "amqp://guest:guest@127.0.0.1:5672/"

// rabbitBroker starts a Broker on the test server (SETTLE_TEST_AMQP_URL) that declares
// topology, or skips (fails under SETTLE_REQUIRE_SERVERS=1).
func rabbitBroker(t *testing.T, url string) *amqp.Broker {
	t.Helper()
	b, err := amqp.New(amqp.URL(url), amqp.DeclareTopology(true), amqp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", url, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// deleteAfter deletes the queues and exchanges the suite used when t ends (after the Broker
// closes: cleanups run last in, first out).
func deleteAfter(t *testing.T, url string, recs ...**recordingTopics) {
	t.Cleanup(func() {
		conn, err := amqp091.Dial(url)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		for _, r := range recs {
			if *r == nil {
				continue
			}
			topics, queues := (*r).used()
			for _, q := range queues {
				if ch, err := conn.Channel(); err == nil {
					if _, err := ch.QueueDelete(q, false, false, false); err != nil {
						t.Errorf("cleanup: delete queue %s: %v", q, err)
					}
					_ = ch.Close()
				}
			}
			for _, x := range topics {
				if ch, err := conn.Channel(); err == nil {
					_ = ch.ExchangeDelete(x, false, false) // only fan-out topics have one
					_ = ch.Close()
				}
			}
		}
	})
}

func runRabbitMQ(t *testing.T, form settlewatermill.AMQPForm) {
	url := coretest.Env("SETTLE_TEST_AMQP_URL", amqpDefault)
	var rq, rg *recordingTopics
	deleteAfter(t, url, &rq, &rg) // runs after the Broker has closed
	b := rabbitBroker(t, url)
	queues, err := settlewatermill.AMQP(b, form)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := settlewatermill.AMQP(b, form, settlewatermill.AMQPFanOut())
	if err != nil {
		t.Fatal(err)
	}
	rq, rg = record(queues), record(groups)
	runSuite(t, false, rq, rg)
}

// TestPubSubRabbitMQClassic runs Watermill's universal suite on RabbitMQ classic queues.
func TestPubSubRabbitMQClassic(t *testing.T) { runRabbitMQ(t, settlewatermill.Classic()) }

// TestPubSubRabbitMQQuorum runs Watermill's universal suite on RabbitMQ quorum queues.
func TestPubSubRabbitMQQuorum(t *testing.T) { runRabbitMQ(t, settlewatermill.Quorum()) }
