package settlewatermill_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
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
		if t.Skipped() { // no broker: nothing was declared
			return
		}
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

// TestRabbitMQMapping: on both queue types the UUID is the AMQP message id, the metadata come
// back as headers, a nack counts an attempt, and a publish no queue takes fails.
func TestRabbitMQMapping(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_AMQP_URL", amqpDefault)
	for _, tc := range []struct {
		name string
		form settlewatermill.AMQPForm
	}{{"classic", settlewatermill.Classic()}, {"quorum", settlewatermill.Quorum()}} {
		t.Run(tc.name, func(t *testing.T) {
			var rq, rg *recordingTopics
			deleteAfter(t, url, &rq, &rg)
			b := rabbitBroker(t, url)
			queues, err := settlewatermill.AMQP(b, tc.form)
			if err != nil {
				t.Fatal(err)
			}
			groups, err := settlewatermill.AMQP(b, tc.form, settlewatermill.AMQPFanOut())
			if err != nil {
				t.Fatal(err)
			}
			rq, rg = record(queues), record(groups)
			topic := "wm-map-" + suffix()
			pub, _ := settlewatermill.NewPublisher(rq)
			if err := pub.Publish(topic, message.NewMessage("u0", nil)); !errors.Is(err, settlewatermill.ErrNoQueue) {
				t.Fatalf("publish to an undeclared queue: %v, want ErrNoQueue", err)
			}
			gpub, _ := settlewatermill.NewPublisher(rg)
			// A fan-out topic no group subscribed to has no exchange yet: the broker refuses the
			// publish by closing the channel, which the publish reports.
			if err := gpub.Publish(topic+"-fan", message.NewMessage("u0", nil)); !errors.Is(err, amqp.ErrNotConfirmed) {
				t.Fatalf("publish to a fan-out topic with no consumer group: %v, want amqp.ErrNotConfirmed", err)
			}

			sub, err := settlewatermill.NewSubscriber(rq, settlewatermill.WithLogger(suiteLogger()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Close() })
			if err := sub.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
			in := message.NewMessage("4a1d3d4e-uuid", []byte("payload"))
			in.Metadata.Set("trace", "abc")
			if err := pub.Publish(topic, in); err != nil {
				t.Fatal(err)
			}
			msgs, err := sub.Subscribe(t.Context(), topic)
			if err != nil {
				t.Fatal(err)
			}
			m := receive(t, msgs)
			if m.UUID != in.UUID || string(m.Payload) != "payload" || m.Metadata.Get("trace") != "abc" ||
				m.Metadata.Get(settlewatermill.MetadataMessageID) != in.UUID || m.Metadata.Get(settlewatermill.MetadataAttempt) != "1" {
				t.Fatalf("received %s %q %v, want %s %q with trace=abc, attempt 1 and the UUID as message id", m.UUID, m.Payload, m.Metadata, in.UUID, "payload")
			}
			for k := range m.Metadata {
				if strings.HasPrefix(k, "x-") {
					t.Fatalf("metadata %v carries RabbitMQ's header %s", m.Metadata, k)
				}
			}
			m.Nack()
			m = receive(t, msgs)
			if m.UUID != in.UUID || m.Metadata.Get(settlewatermill.MetadataAttempt) != "2" {
				t.Fatalf("after a nack: %s attempt %s, want %s attempt 2", m.UUID, m.Metadata.Get(settlewatermill.MetadataAttempt), in.UUID)
			}
			m.Ack()
		})
	}
}
