package amqp_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// Describe reports the declaration a subscription makes, without a connection: the queue
// arguments its cap becomes on a quorum queue, its waiting queue, its dead-letter queue.
func TestDescribeReportsTheDeclaration(t *testing.T) {
	b, err := amqp.New(amqp.URL("amqp://guest:guest@127.0.0.1:1/"), amqp.DeclareTopology(true)) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	classic, err := amqp.Classic(b, "refunds", amqp.DLXTTL(), amqp.Bind("payments", "topic", "refund.*"),
		amqp.Arguments(amqp091.Table{"x-max-length": int64(1000)}))
	if err != nil {
		t.Fatal(err)
	}
	quorum, err := amqp.Quorum(b, "payouts", amqp.Prefetch(16))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New(core.WithInfo("t", "1"))
	h := func(context.Context, *core.Message[string]) error { return nil }
	for _, m := range []struct {
		ep   core.Endpoint
		dest string
	}{{classic, "refunds.dead"}, {quorum, "payouts.dead"}} {
		if err := core.Subscribe(app, m.ep, h, core.DeadLetterAfter(5, m.dest)); err != nil {
			t.Fatal(err)
		}
	}
	subs := app.Describe().Subscriptions
	c, q := subs[0].Endpoint, subs[1].Endpoint
	if c == nil || q == nil {
		t.Fatal("the queues do not describe themselves")
	}
	if c.Backend != core.BackendAMQP || c.AMQP.Type != "classic" || !c.AMQP.Durable || !strings.HasPrefix(c.Delay, `waiting queue "refunds.retry"`) {
		t.Errorf("classic = %+v, %+v", c, c.AMQP)
	}
	if !reflect.DeepEqual(c.AMQP.Arguments, map[string]any{"x-max-length": int64(1000)}) {
		t.Errorf("classic arguments = %v: settle counts a classic queue's deliveries, the cap adds none", c.AMQP.Arguments)
	}
	if want := []core.AMQPBinding{{Exchange: "payments", Kind: "topic", Key: "refund.*"}}; !reflect.DeepEqual(c.AMQP.Bindings, want) {
		t.Errorf("bindings = %v, want %v", c.AMQP.Bindings, want)
	}
	if len(c.Related) != 2 || c.Related[0].Role != core.RoleDelay || c.Related[0].Name != "refunds.retry" ||
		c.Related[0].AMQP.Arguments["x-dead-letter-routing-key"] != "refunds" ||
		c.Related[1].Role != core.RoleDeadLetter || c.Related[1].Name != "refunds.dead" || c.Related[1].AMQP == nil {
		t.Errorf("classic related = %+v", c.Related)
	}
	wantArgs := map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(5 + amqp.BackstopMargin), "x-dead-letter-exchange": "",
		"x-dead-letter-routing-key": "payouts.dead", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
	if !reflect.DeepEqual(q.AMQP.Arguments, wantArgs) {
		t.Errorf("quorum arguments = %v, want %v", q.AMQP.Arguments, wantArgs)
	}
	if q.Delay != "process" || q.Settings["prefetch"] != 16 || q.Settings["publish_policy"] != "confirmed" || q.Settings["declare_topology"] != true {
		t.Errorf("quorum = delay %q, settings %v", q.Delay, q.Settings)
	}
}

// TestDescribeSaysWhatIsDeclared runs the subscriptions on the in-process RabbitMQ and compares
// every queue the descriptions name with the queue the broker holds: the description is what
// settle declares, not a second account of it.
func TestDescribeSaysWhatIsDeclared(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rabbit := amqptest.NewBroker(clk)
	b, err := amqp.New(rabbit.Dial, amqp.DeclareTopology(true), amqp.WithClock(clk), amqp.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New(core.WithClock(clk), core.WithLogger(quiet), core.WithoutSignals())
	app.Register(b)
	classic, err := amqp.Classic(b, "refunds", amqp.DLXTTL(), amqp.Arguments(amqp091.Table{"x-max-length": int64(1000)}))
	if err != nil {
		t.Fatal(err)
	}
	quorum, err := amqp.Quorum(b, "payouts")
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *core.Message[string]) error { return nil }
	if err := core.Subscribe(app, classic, h, core.DeadLetterAfter(5, "refunds.dead")); err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, quorum, h, core.DeadLetterAfter(3, "payouts.dead")); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		t.Fatal(err)
	}
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	checked := 0
	for _, s := range app.Describe().Subscriptions {
		queues := []*core.AMQPQueue{s.Endpoint.AMQP}
		for _, r := range s.Endpoint.Related {
			queues = append(queues, r.AMQP)
		}
		for _, q := range queues {
			got, ok := rabbit.Queue(q.Name)
			if !ok {
				t.Errorf("%s: described, not declared", q.Name)
				continue
			}
			if got.Type != q.Type || got.Durable != q.Durable || got.Exclusive != q.Exclusive || got.AutoDelete != q.AutoDelete {
				t.Errorf("%s: declared %+v, described %+v", q.Name, got, q)
			}
			if want := textOf(q.Arguments); textOf(got.Args) != want {
				t.Errorf("%s: declared with %s, described with %s", q.Name, textOf(got.Args), want)
			}
			checked++
		}
	}
	if checked != 5 { // refunds, refunds.retry, refunds.dead, payouts, payouts.dead
		t.Errorf("compared %d queues, want 5", checked)
	}
}

// textOf writes arguments as sorted k=v text, so that 5 and int64(5) compare equal.
func textOf(args map[string]any) string {
	var kv []string
	for k, v := range args {
		kv = append(kv, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(kv)
	return strings.Join(kv, " ")
}
