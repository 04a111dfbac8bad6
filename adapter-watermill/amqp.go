package settlewatermill

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// AMQPForm builds the endpoint of one RabbitMQ queue; Classic and Quorum return one.
type AMQPForm func(b *amqp.Broker, queue string, bind []amqp.QueueOption) (core.Endpoint, error)

// Classic makes the Topics' queues classic queues with opts.
func Classic(opts ...amqp.ClassicOption) AMQPForm {
	return func(b *amqp.Broker, queue string, bind []amqp.QueueOption) (core.Endpoint, error) {
		all := append([]amqp.ClassicOption(nil), opts...)
		for _, o := range bind {
			all = append(all, o)
		}
		return amqp.Classic(b, queue, all...)
	}
}

// Quorum makes the Topics' queues quorum queues with opts.
func Quorum(opts ...amqp.QuorumOption) AMQPForm {
	return func(b *amqp.Broker, queue string, bind []amqp.QueueOption) (core.Endpoint, error) {
		all := append([]amqp.QuorumOption(nil), opts...)
		for _, o := range bind {
			all = append(all, o)
		}
		return amqp.Quorum(b, queue, all...)
	}
}

// AMQPTopics are Topics on RabbitMQ. Without FanOut a topic is the queue of that name, and a
// publish goes to it through the default exchange. With AMQPFanOut a topic is a fanout exchange
// of that name and each consumer group a queue bound to it (named by AMQPQueueName), and a
// publish goes to the exchange. Queues, exchanges and bindings are declared when a subscription
// opens (or SubscribeInitialize runs) if the Broker declares topology (amqp.DeclareTopology),
// and checked otherwise. Every publish is confirmed and mandatory: a message no queue takes
// (the topic has no queue or consumer group yet) fails the publish instead of vanishing.
type AMQPTopics struct {
	b      *amqp.Broker
	form   AMQPForm
	fanOut bool
	name   QueueNameFunc
}

var _ Topics = (*AMQPTopics)(nil)

// AMQPOption configures AMQPTopics.
type AMQPOption func(*AMQPTopics) error

// AMQPFanOut makes each topic a fanout exchange and each consumer group a queue bound to it:
// every group receives every message published after its queue was declared.
func AMQPFanOut() AMQPOption {
	return func(t *AMQPTopics) error { t.fanOut = true; return nil }
}

// AMQPQueueName names a consumer group's queue under AMQPFanOut (default DefaultQueueName).
func AMQPQueueName(f QueueNameFunc) AMQPOption {
	return func(t *AMQPTopics) error {
		if f == nil {
			return errors.New("settlewatermill.AMQPQueueName(nil): no function")
		}
		t.name = f
		return nil
	}
}

// AMQP returns Topics on the Broker b whose queues are of form (Classic or Quorum). The Broker
// is the caller's: start it (b.Start) before use, close it after the Subscribers.
func AMQP(b *amqp.Broker, form AMQPForm, opts ...AMQPOption) (*AMQPTopics, error) {
	if b == nil || form == nil {
		return nil, errors.New("settlewatermill.AMQP: nil Broker or form")
	}
	t := &AMQPTopics{b: b, form: form, name: DefaultQueueName}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("settlewatermill.AMQP: nil option")
		}
		if err := o(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Endpoint returns the queue of topic (under AMQPFanOut: group's queue, bound to the topic's
// exchange).
func (t *AMQPTopics) Endpoint(ctx context.Context, topic, group string) (core.Endpoint, error) {
	if err := checkGroup("AMQP", topic, group, t.fanOut); err != nil {
		return nil, err
	}
	if !t.fanOut {
		return t.form(t.b, topic, nil)
	}
	return t.form(t.b, t.name(topic, group), []amqp.QueueOption{amqp.Bind(topic, "fanout", "")})
}

// Publish publishes msgs to topic one by one, each confirmed by the broker, with the UUID as
// the message id and the metadata as headers (RabbitMQ refuses keys that begin with "x-").
func (t *AMQPTopics) Publish(ctx context.Context, topic string, msgs []*message.Message) error {
	if strings.TrimSpace(topic) == "" {
		return errors.New("the topic is empty")
	}
	exchange, key := "", topic
	if t.fanOut {
		exchange, key = topic, ""
	}
	for i, m := range msgs {
		err := amqp.Publish(ctx, t.b, exchange, key, []byte(m.Payload), amqp.WithPayloadCodec(core.Raw),
			amqp.WithMessageID(m.UUID), amqp.WithHeaders(m.Metadata), amqp.WithConfirm())
		if err != nil {
			if errors.Is(err, amqp.ErrUnroutable) {
				err = fmt.Errorf("%w: %w", ErrNoQueue, err)
			}
			return fmt.Errorf("message %d (%s): %w", i, m.UUID, err)
		}
	}
	return nil
}
