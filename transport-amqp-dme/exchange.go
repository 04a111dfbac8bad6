package amqpdme

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rabbitmq/amqp091-go"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// ExchangeType is the exchange type the rabbitmq_delayed_message_exchange plugin adds.
const ExchangeType = "x-delayed-message"

// Suffix is appended to a queue's name to name its delayed exchange when no name is given.
const Suffix = ".delay"

// DelayHeader is the header in which the plugin reads a message's delay, in milliseconds.
const DelayHeader = "x-delay"

// ErrPluginMissing is matched (errors.Is) by the error of a subscription whose delayed exchange
// the server refused to declare because it does not know the x-delayed-message type: the
// rabbitmq_delayed_message_exchange plugin is not enabled. The error unwraps to the server's
// *amqp091.Error (503 COMMAND_INVALID, which closes the connection).
var ErrPluginMissing = errors.New("the server has no x-delayed-message exchange type: enable the rabbitmq_delayed_message_exchange plugin (rabbitmq-plugins enable rabbitmq_delayed_message_exchange)")

// Exchange is an amqp.Delay that parks RetryAfter copies in a delayed-message exchange: an
// exchange of type x-delayed-message with x-delayed-type=direct, bound to the subscribed queue
// with the queue's name as routing key. The copy (settle-retry-count raised) is published to
// it with its delay in the x-delay header, then the original is acknowledged on the same
// channel. The plugin holds each message for its own delay, so a short delay never waits
// behind a long one, and it keeps persistent messages on disk, so a copy survives a restart
// of the service.
//
// Mount it with amqp.WithDelay on a classic or quorum queue. One Exchange may serve several
// queues: by default each queue gets its own exchange, "<queue>.delay"; with Named they share
// one, each bound under its own name.
type Exchange struct {
	name string // "" derives it from the queue
}

var _ amqp.Delay = (*Exchange)(nil)

// Option configures an Exchange.
type Option func(*Exchange) error

// Named gives the delayed exchange a fixed name instead of "<queue>.delay". Queues mounted with
// the same Exchange then share it, each bound with its own name as routing key.
func Named(name string) Option {
	return func(e *Exchange) error {
		switch {
		case strings.TrimSpace(name) == "":
			return fmt.Errorf("amqpdme.Named(%q): the exchange name is empty", name)
		case strings.HasPrefix(name, "amq."):
			return fmt.Errorf("amqpdme.Named(%q): the amq. prefix is reserved by RabbitMQ", name)
		case len(name) > 255:
			return fmt.Errorf("amqpdme.Named(%.40q…): %d bytes; AMQP allows at most 255", name, len(name))
		}
		e.name = name
		return nil
	}
}

// New returns an Exchange; it fails, naming the option, on an invalid one.
func New(opts ...Option) (*Exchange, error) {
	e := &Exchange{}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("amqpdme.New: nil option")
		}
		if err := o(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Name returns the name of the delayed exchange of queue.
func (e *Exchange) Name(queue string) string {
	if e.name != "" {
		return e.name
	}
	return queue + Suffix
}

// Args are the exchange's arguments: it routes like a direct exchange once a delay is over.
func (e *Exchange) Args() amqp091.Table { return amqp091.Table{"x-delayed-type": "direct"} }

// Ensure declares the exchange (durable) and binds queue to it with the queue's name as
// routing key, or, without declaring, checks passively that the exchange exists (AMQP has no
// passive check of a binding: an exchange declared elsewhere must be bound to the queue with
// the queue's name as routing key).
func (e *Exchange) Ensure(ch amqp.Channel, queue string, declare bool) error {
	name := e.Name(queue)
	if len(name) > 255 {
		return fmt.Errorf("delayed exchange %.40q…: %d bytes; AMQP allows at most 255", name, len(name))
	}
	if !declare {
		if err := ch.ExchangeDeclarePassive(name, ExchangeType, true, false, false, false, nil); err != nil {
			return translate(name, nil, err)
		}
		return nil
	}
	if err := ch.ExchangeDeclare(name, ExchangeType, true, false, false, false, e.Args()); err != nil {
		return translate(name, e.Args(), err)
	}
	if err := ch.QueueBind(queue, queue, name, false, nil); err != nil {
		return fmt.Errorf("bind queue %q to delayed exchange %q with key %q: %w", queue, name, queue, err)
	}
	return nil
}

// translate turns the server's refusal into a *amqp.TopologyError (missing, mismatched) or a
// *PluginError (unknown exchange type).
func translate(name string, args amqp091.Table, err error) error {
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp091.NotFound, amqp091.PreconditionFailed:
			return &amqp.TopologyError{Kind: "delayed exchange", Name: name, Declared: args, Err: err}
		case amqp091.CommandInvalid:
			if strings.Contains(ae.Reason, ExchangeType) {
				return &PluginError{Exchange: name, Err: err}
			}
		}
	}
	return fmt.Errorf("delayed exchange %q: %w", name, err)
}

// PluginError reports a delayed exchange the server could not declare because the
// rabbitmq_delayed_message_exchange plugin is not enabled. It matches ErrPluginMissing and
// unwraps to the server's error.
type PluginError struct {
	// Exchange names the exchange that was declared.
	Exchange string
	// Err is the server's error.
	Err error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("delayed exchange %q: %v: %v", e.Exchange, ErrPluginMissing, e.Err)
}

// Is makes a PluginError match ErrPluginMissing.
func (e *PluginError) Is(target error) bool { return target == ErrPluginMissing }

func (e *PluginError) Unwrap() error { return e.Err }

// Route sends the copy to the delayed exchange with the queue's name as routing key and the
// delay, in milliseconds rounded up, in the x-delay header.
func (e *Exchange) Route(queue string, delay time.Duration, msg *amqp091.Publishing) (exchange, key string) {
	ms := int64(0)
	if delay > 0 {
		ms = int64((delay + time.Millisecond - 1) / time.Millisecond)
	}
	if msg.Headers == nil {
		msg.Headers = amqp091.Table{}
	}
	msg.Headers[DelayHeader] = ms
	return e.Name(queue), queue
}

// RoutesLater reports true: the plugin routes a copy only when its delay is over, and RabbitMQ
// returns every mandatory publishing to the exchange as unroutable, so the transport publishes
// these copies confirmed but not mandatory (amqp.RoutesLater). A copy is lost if the exchange's
// binding to the queue is removed before it is due; with DeclareTopology(true) Ensure binds it
// at every start and reconnection.
func (e *Exchange) RoutesLater() bool { return true }

var _ amqp.RoutesLater = (*Exchange)(nil)

// Where names the delayed exchange.
func (e *Exchange) Where(queue string) string {
	return fmt.Sprintf("delayed-message exchange %q (bound to %q)", e.Name(queue), queue)
}
