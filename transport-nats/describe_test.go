package natsjs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// Describe reports the stream and consumer a subscription declares, without a connection.
func TestDescribeReportsStreamAndConsumer(t *testing.T) {
	conn, err := natsjs.New("nats://127.0.0.1:1", natsjs.DeclareTopology(true)) // never connected
	if err != nil {
		t.Fatal(err)
	}
	q, err := natsjs.NewQueue(conn, "refunds.new", natsjs.AckWait(time.Minute), natsjs.StreamSubjects("refunds.>"))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New(core.WithInfo("t", "1"))
	h := func(context.Context, *core.Message[string]) error { return nil }
	if err := core.Subscribe(app, q, h, core.DeadLetterAfter(5, "refunds.dead")); err != nil {
		t.Fatal(err)
	}
	d := app.Describe().Subscriptions[0].Endpoint
	if d == nil || d.Backend != core.BackendNATS || d.NATS == nil {
		t.Fatalf("description = %+v", d)
	}
	n := d.NATS
	if n.Subject != "refunds.new" || n.Stream != q.Stream() || n.Consumer != q.Durable() || len(n.Subjects) != 1 || n.Subjects[0] != "refunds.>" {
		t.Errorf("NATS = %+v", n)
	}
	if d.Settings["ack_wait"] != "1m0s" || d.Settings["max_deliver"] != 5+natsjs.BackstopMargin || d.Settings["declare_topology"] != true {
		t.Errorf("settings = %v", d.Settings)
	}
	if len(d.Related) != 1 || d.Related[0].Role != core.RoleDeadLetter || d.Related[0].Name != "refunds.dead" ||
		!strings.Contains(d.Related[0].About, "settle declares one") {
		t.Errorf("related = %+v", d.Related)
	}
	if !strings.HasPrefix(d.Delay, "server") {
		t.Errorf("delay = %q: JetStream holds a RetryAfter", d.Delay)
	}
}
