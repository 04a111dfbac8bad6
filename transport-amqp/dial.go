package amqp

import (
	"context"

	"github.com/rabbitmq/amqp091-go"
)

// Dial connects to a RabbitMQ server through amqp091-go and returns the connection as a
// Connection.
func Dial(url string, cfg amqp091.Config) (Connection, error) {
	c, err := amqp091.DialConfig(url, cfg)
	if err != nil {
		return nil, err
	}
	return connection{c}, nil
}

// connection adapts *amqp091.Connection to Connection.
type connection struct{ *amqp091.Connection }

func (c connection) Channel() (Channel, error) {
	ch, err := c.Connection.Channel()
	if err != nil {
		return nil, err
	}
	return channel{ch}, nil
}

// channel adapts *amqp091.Channel to Channel; only the deferred confirmation needs a shim.
type channel struct{ *amqp091.Channel }

func (c channel) PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (DeferredConfirmation, error) {
	dc, err := c.Channel.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, immediate, msg)
	if dc == nil {
		// A nil *DeferredConfirmation must not become a non-nil interface.
		return nil, err
	}
	return dc, err
}
