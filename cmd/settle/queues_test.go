package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCLIQueuesAndHealth runs settle queues and settle health on each backend.
func TestCLIQueuesAndHealth(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.make(t)
			f.addDead(t, []byte(`{"refund":1}`), deadHeaders(f.origin, "card closed", 3))
			if f.addReady != nil {
				f.addReady(t, []byte(`{"refund":2}`))
			}
			cmd := func(args ...string) []string { return append(args, f.args...) }

			code, out, errOut := settle(t, cmd("queues")...)
			if code != exitOK || !strings.Contains(out, "READY") {
				t.Fatalf("queues: exit %d\n%s%s", code, out, errOut)
			}
			code, out, _ = settle(t, cmd("queues", "--json")...)
			var l queueList
			if code != exitOK || json.Unmarshal([]byte(out), &l) != nil || l.Scope == "" || !strings.Contains(errOut, l.Scope) {
				t.Fatalf("queues --json: exit %d\n%s", code, out)
			}
			ready := map[string]int64{}
			for _, q := range l.Queues {
				ready[q.Queue] = q.Ready
			}
			switch fx.name {
			case "sqlite", "postgres", "mariadb":
				// Both groups of the table, each with its figures.
				if len(l.Queues) != 2 || ready["refunds"] != 1 || ready["refunds.dead"] != 1 || !strings.Contains(l.Scope, "every group") {
					t.Errorf("queues of a grouped table: %+v", l)
				}
			case "rabbitmq":
				if len(l.Queues) != 2 || ready[f.origin] != 0 || ready[f.origin+".dead"] != 1 || !strings.Contains(l.Scope, "management API") {
					t.Errorf("queues of RabbitMQ: %+v", l)
				}
			case "nats":
				if !strings.Contains(l.Scope, "the consumers of stream") || !strings.Contains(l.Scope, f.origin) {
					t.Errorf("queues of NATS: %+v", l)
				}
				natsConsumerAndMessage(t, f.origin)
				code, out, _ = settle(t, cmd("queues", "--json")...)
				l = queueList{}
				if code != exitOK || json.Unmarshal([]byte(out), &l) != nil {
					t.Fatalf("queues --json: exit %d\n%s", code, out)
				}
				want := "consumer probe (" + f.origin + ")"
				if len(l.Queues) != 1 || l.Queues[0].Queue != want || l.Queues[0].Ready != 1 || l.Subjects[f.origin] != 1 {
					t.Errorf("queues of NATS with a consumer and a message: %+v; want %s with 1 ready, and 1 stored", l, want)
				}
			}

			code, out, errOut = settle(t, cmd("health")...)
			if code != exitOK || !strings.HasPrefix(out, "healthy: ") {
				t.Errorf("health: exit %d\n%s%s", code, out, errOut)
			}
			code, out, errOut = settle(t, cmd("health", "--max-dead", "0")...)
			if code != exitUnhealthy || !strings.Contains(out, "dead 1 > --max-dead 0") {
				t.Errorf("health --max-dead 0 with one dead letter: exit %d, want %d\n%s%s", code, exitUnhealthy, out, errOut)
			}
			if code, out, _ = settle(t, cmd("health", "--max-dead", "1", "--json")...); code != exitOK || !strings.Contains(out, `"healthy": true`) {
				t.Errorf("health --max-dead 1 --json: exit %d\n%s", code, out)
			}
			code, out, _ = settle(t, cmd("health", "--max-oldest", "1h")...)
			if fx.name == "rabbitmq" {
				// RabbitMQ gives no message age over AMQP: a probe must not pass by not looking.
				if code != exitUnhealthy || !strings.Contains(out, "cannot be checked") {
					t.Errorf("health --max-oldest on RabbitMQ: exit %d\n%s", code, out)
				}
			} else if code != exitOK {
				t.Errorf("health --max-oldest 1h: exit %d\n%s", code, out)
			}
		})
	}
}

func TestCLIHealthUnreachable(t *testing.T) {
	code, _, errOut := settle(t, "health", "--dsn", "amqp://guest:guest@127.0.0.1:"+freePort(t)+"/", "--queue", "q")
	if code != exitUnreachable || !strings.Contains(errOut, "cannot reach") {
		t.Errorf("health of an unreachable RabbitMQ: exit %d, want %d\n%s", code, exitUnreachable, errOut)
	}
	f := sqliteFixture(t)
	code, _, errOut = settle(t, "health", "--dsn", strings.SplitN(f.target, "?", 2)[0], "--table", "nope", "--queue", "q")
	if code != exitNoTarget {
		t.Errorf("health of a missing table: exit %d, want %d\n%s", code, exitNoTarget, errOut)
	}
}

// natsConsumerAndMessage adds a durable consumer "probe" to the stream of subject and publishes
// one message to it.
func natsConsumerAndMessage(t *testing.T, subject string) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "probe", FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subject, []byte(`{"refund":3}`)); err != nil {
		t.Fatal(err)
	}
}
