package amqptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// A message parked with a TTL returns through the dead-letter exchange when the virtual clock
// passes its expiry.
func Example() {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := amqptest.NewBroker(clk)
	conn, _ := broker.Dial()
	ch, _ := conn.Channel()

	_, _ = ch.QueueDeclare("work", true, false, false, false, nil)
	_, _ = ch.QueueDeclare("work.retry", true, false, false, false, amqp091.Table{
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": "work",
	})
	_ = ch.PublishWithContext(context.Background(), "", "work.retry", false, false,
		amqp091.Publishing{Body: []byte("again"), Expiration: "5000"})

	clk.Advance(4 * time.Second)
	fmt.Println("after 4s:", len(broker.Messages("work")))
	clk.Advance(time.Second)
	m := broker.Messages("work")[0]
	death := m.Headers["x-death"].([]any)[0].(amqp091.Table)
	fmt.Println("after 5s:", string(m.Body), death["reason"], death["queue"], death["count"])
	// Output:
	// after 4s: 0
	// after 5s: again expired work.retry 1
}
