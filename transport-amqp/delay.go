package amqp

import (
	"context"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// delayer parks the delayed copy of a RetryAfter until it is due back on the queue. The
// consumer acknowledges the original after park returns. The in-process delayer is the default;
// broker-side delays (a waiting queue with per-message TTL, the delayed-message exchange) park
// the copy on the server instead, so it survives a restart.
type delayer interface {
	park(c *consumer, d core.Delivery, delay time.Duration, copy amqp091.Publishing)
}

// inProcessDelay holds the copy in core.InProcessDelay and publishes it back to the queue when
// it is due, through the Broker's publishing channel: at-most-once, as that type documents
// (a stop during the delay loses the copy; every scheduled copy and every loss is logged).
type inProcessDelay struct {
	b      *Broker
	policy PublishPolicy
}

func (p inProcessDelay) park(c *consumer, d core.Delivery, delay time.Duration, copy amqp091.Publishing) {
	queue := c.cfg.name
	p.b.delays.Schedule(queue, d, delay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.b.publish(ctx, "", queue, copy, p.policy == Confirmed); err != nil {
			c.log.Error("amqp: delayed copy lost: publishing it back failed",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
		}
	})
}
