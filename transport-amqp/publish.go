package amqp

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// PublishOption configures one Publish.
type PublishOption func(*publishing) error

type publishing struct {
	headers       map[string]string
	messageID     string
	correlationID string
	transient     bool
	confirm       bool
	codec         core.Codec
	prop          core.Propagator // WithPropagator; nil: the context's
}

// WithHeaders sets the message's headers (string values). Keys beginning with "x-" are
// RabbitMQ's and are refused.
func WithHeaders(h map[string]string) PublishOption {
	return func(p *publishing) error {
		for k := range h {
			if len(k) >= 2 && k[:2] == "x-" {
				return fmt.Errorf("amqp.WithHeaders: header %q: the x- prefix is reserved for RabbitMQ", k)
			}
		}
		p.headers = maps.Clone(h)
		return nil
	}
}

// WithMessageID sets the message id (default: 16 random hex digits).
func WithMessageID(id string) PublishOption {
	return func(p *publishing) error {
		if err := validName("amqp.WithMessageID: message id", id); err != nil {
			return err
		}
		p.messageID = id
		return nil
	}
}

// WithCorrelationID sets the correlation id.
func WithCorrelationID(id string) PublishOption {
	return func(p *publishing) error {
		if err := validName("amqp.WithCorrelationID: correlation id", id); err != nil {
			return err
		}
		p.correlationID = id
		return nil
	}
}

// Transient publishes the message non-persistent (delivery mode 1); messages are persistent
// by default.
func Transient() PublishOption {
	return func(p *publishing) error { p.transient = true; return nil }
}

// WithConfirm publishes the message mandatory and waits until RabbitMQ confirms it (publisher
// confirms): Publish returns a *ReturnError (ErrUnroutable) when no queue is bound for it, and
// ErrNotConfirmed when it is refused (a full queue under x-overflow reject-publish) or the
// channel closes first. Without it a message that reaches no queue is dropped silently.
func WithConfirm() PublishOption {
	return func(p *publishing) error { p.confirm = true; return nil }
}

// WithPayloadCodec encodes the payload with c (default core.JSON); its content type is set on
// the message.
func WithPayloadCodec(c core.Codec) PublishOption {
	return func(p *publishing) error {
		if c == nil {
			return errors.New("amqp.WithPayloadCodec(nil): no codec")
		}
		p.codec = c
		return nil
	}
}

// Publish encodes v and publishes it to exchange ("" is the default exchange, where the routing
// key is a queue name) with routingKey, persistent unless Transient, through the Broker's
// publishing channel (connecting or reconnecting as needed).
func Publish[T any](ctx context.Context, b *Broker, exchange, routingKey string, v T, opts ...PublishOption) error {
	if b == nil {
		return errors.New("amqp.Publish: nil Broker")
	}
	if err := validName("amqp.Publish: exchange", exchange); err != nil {
		return err
	}
	if err := validName("amqp.Publish: routing key", routingKey); err != nil {
		return err
	}
	p := publishing{codec: core.JSON}
	for _, o := range opts {
		if o == nil {
			return errors.New("amqp.Publish: nil option")
		}
		if err := o(&p); err != nil {
			return err
		}
	}
	body, err := p.codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("amqp.Publish to %q/%q: encode %T: %w", exchange, routingKey, v, err)
	}
	p.injectTrace(ctx)
	msg := amqp091.Publishing{
		ContentType:   p.codec.ContentType(),
		DeliveryMode:  amqp091.Persistent,
		MessageId:     p.messageID,
		CorrelationId: p.correlationID,
		Timestamp:     b.clock.Now(),
		Body:          body,
	}
	if msg.MessageId == "" {
		msg.MessageId = randomID()
	}
	if p.transient {
		msg.DeliveryMode = amqp091.Transient
	}
	if len(p.headers) > 0 {
		msg.Headers = make(amqp091.Table, len(p.headers))
		for k, v := range p.headers {
			msg.Headers[k] = v
		}
	}
	if err := b.publish(ctx, exchange, routingKey, msg, p.confirm); err != nil {
		return fmt.Errorf("amqp.Publish to exchange %q with routing key %q: %w", exchange, routingKey, err)
	}
	return nil
}
