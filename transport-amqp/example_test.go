package amqp_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

type Refund struct {
	ID   int    `json:"id"`
	Card string `json:"card"`
}

// Refunds on a classic queue: the processor keeps failing, so after three deliveries the refund
// is in refunds.dead with its count. The example runs on the in-process RabbitMQ; with a real
// server, pass amqp.URL("amqp://guest:guest@localhost:5672/") to amqp.New instead.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rabbit := amqptest.NewBroker(clk)

	broker, err := amqp.New(rabbit.Dial, amqp.DeclareTopology(true), amqp.WithClock(clk), amqp.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	app := core.New(core.WithClock(clk), core.WithLogger(quiet), core.WithoutSignals())
	app.Register(broker)

	refunds, err := amqp.Classic(broker, "refunds", amqp.Prefetch(50))
	if err != nil {
		panic(err)
	}
	_ = core.Subscribe(app, refunds, func(_ context.Context, m *core.Message[Refund]) error {
		fmt.Println("attempt", m.Attempt(), "refund", m.Payload.ID)
		return core.Retry() // the card processor did not answer
	}, core.DeadLetterAfter(3, "refunds.dead"))

	reviewed := make(chan struct{})
	dead, _ := amqp.Classic(broker, "refunds.dead")
	_ = core.Subscribe(app, dead, func(_ context.Context, m *core.Message[Refund]) error {
		fmt.Println("needs a person: refund", m.Payload.ID, "after", m.Headers()[amqp.RetryCountHeader], "deliveries")
		close(reviewed)
		return nil
	})

	// The queue exists before the first refund is published (here declared as settle would).
	conn, _ := rabbit.Dial()
	ch, _ := conn.Channel()
	_, _ = ch.QueueDeclare("refunds", true, false, false, false, nil)
	_ = amqp.Publish(context.Background(), broker, "", "refunds", Refund{ID: 7, Card: "4242"})

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- app.Run(ctx) }()
	<-reviewed
	stop()
	<-done
	// Output:
	// attempt 1 refund 7
	// attempt 2 refund 7
	// attempt 3 refund 7
	// needs a person: refund 7 after 3 deliveries
}

// Code written against Connection and Channel runs unchanged on a real RabbitMQ (through
// Dial) and on the in-process broker.
func Example_connection() {
	broker := amqptest.NewBroker(clock.NewVirtual(time.Unix(0, 0)))
	var conn amqp.Connection
	conn, _ = broker.Dial() // or amqp.Dial("amqp://guest:guest@127.0.0.1:5672/", amqp091.Config{})
	defer conn.Close()
	ch, _ := conn.Channel()

	q, _ := ch.QueueDeclare("greetings", true, false, false, false, nil)
	_ = ch.Confirm(false)
	dc, _ := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q.Name, false, false,
		amqp091.Publishing{Body: []byte("hello")})
	fmt.Println("confirmed:", dc.Wait())

	d, ok, _ := ch.Get(q.Name, false)
	fmt.Println(ok, string(d.Body), d.DeliveryTag)
	_ = d.Ack(false)
	// Output:
	// confirmed: true
	// true hello 1
}
