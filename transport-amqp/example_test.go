package amqp_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core/clock"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// Code written against Connection and Channel runs unchanged on a real RabbitMQ (through
// Dial) and on the in-process broker.
func Example() {
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
