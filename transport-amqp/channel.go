package amqp

import (
	"context"

	"github.com/rabbitmq/amqp091-go"
)

// Connection is the part of an AMQP connection the transport uses. Its methods have the
// signatures of *amqp091.Connection's, except that Channel returns this package's Channel, so
// that the real client (through Dial) and amqptest's in-process broker are interchangeable.
type Connection interface {
	// Channel opens a new channel on the connection.
	Channel() (Channel, error)
	// NotifyClose registers a listener for the connection's close. A connection closed by the
	// server (or the broker emulation) sends the *amqp091.Error and then closes the channel; a
	// connection closed by Close only closes it. Buffer the channel: the sender waits for it.
	NotifyClose(receiver chan *amqp091.Error) chan *amqp091.Error
	// Close closes the connection and every channel on it; unacknowledged deliveries return to
	// their queues.
	Close() error
	// IsClosed reports whether the connection is closed.
	IsClosed() bool
}

// Channel is the part of an AMQP channel the transport uses. Every method has the signature of
// the *amqp091.Channel method of the same name, except PublishWithDeferredConfirmWithContext,
// which returns the DeferredConfirmation interface: amqp091's struct of that name cannot be
// built outside its package. Errors raised by the broker are *amqp091.Error values; an error
// that closes the channel is also sent to its NotifyClose listeners.
type Channel interface {
	// ExchangeDeclare declares an exchange, or checks that an existing one is equivalent.
	ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	// ExchangeDeclarePassive checks that an exchange exists; a missing one closes the channel
	// with 404 NOT_FOUND.
	ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	// ExchangeDelete deletes an exchange.
	ExchangeDelete(name string, ifUnused, noWait bool) error

	// QueueDeclare declares a queue, or checks that an existing one is equivalent.
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	// QueueDeclarePassive checks that a queue exists and reports its ready messages and
	// consumers; a missing one closes the channel with 404 NOT_FOUND.
	QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	// QueueBind binds a queue to an exchange with a routing key.
	QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error
	// QueueUnbind removes a binding.
	QueueUnbind(name, key, exchange string, args amqp091.Table) error
	// QueueDelete deletes a queue and returns the number of messages it held.
	QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error)
	// QueuePurge removes a queue's ready messages and returns how many there were.
	QueuePurge(name string, noWait bool) (int, error)

	// Qos limits the unacknowledged deliveries per consumer (global=false) or per channel
	// (global=true).
	Qos(prefetchCount, prefetchSize int, global bool) error
	// Consume starts a consumer; deliveries arrive on the returned channel, which is closed when
	// the consumer is cancelled or the channel closes.
	Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
	// Cancel stops a consumer. Its unacknowledged deliveries stay on the channel.
	Cancel(consumer string, noWait bool) error
	// Get fetches one message (basic.get); ok is false when the queue has none ready.
	Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error)
	// Ack acknowledges a delivery, or with multiple every delivery up to tag (0 = all).
	Ack(tag uint64, multiple bool) error
	// Nack rejects a delivery, or with multiple every delivery up to tag (0 = all).
	Nack(tag uint64, multiple, requeue bool) error
	// Reject rejects one delivery.
	Reject(tag uint64, requeue bool) error

	// PublishWithContext publishes a message. Broker-side failures (a missing exchange) close the
	// channel asynchronously instead of failing the call.
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	// PublishWithDeferredConfirmWithContext publishes a message and, in confirm mode, returns
	// its confirmation; outside confirm mode the confirmation is nil.
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (DeferredConfirmation, error)
	// Confirm puts the channel in confirm mode: publishings are numbered from 1 and confirmed.
	Confirm(noWait bool) error
	// NotifyPublish registers a listener for publisher confirmations, delivered in order.
	NotifyPublish(confirm chan amqp091.Confirmation) chan amqp091.Confirmation
	// NotifyReturn registers a listener for mandatory publishings the broker could not route
	// (basic.return). RabbitMQ sends the return before the publishing's confirmation, and the
	// client hands it to the listener before it resolves that confirmation, so a buffered
	// listener holds the return by the time the confirmation is seen. The broker's reader
	// waits for the listener: buffer it and keep reading.
	NotifyReturn(c chan amqp091.Return) chan amqp091.Return

	// NotifyClose registers a listener for the channel's close: a close by the broker sends
	// the *amqp091.Error and then closes the listener; Close only closes it.
	NotifyClose(c chan *amqp091.Error) chan *amqp091.Error
	// NotifyCancel registers a listener for consumer tags cancelled by the broker (the queue
	// was deleted).
	NotifyCancel(c chan string) chan string
	// Close closes the channel; its unacknowledged deliveries return to their queues with
	// Redelivered set.
	Close() error
	// IsClosed reports whether the channel is closed.
	IsClosed() bool
}

// DeferredConfirmation is the publisher confirmation of one publishing, as returned by
// PublishWithDeferredConfirmWithContext. *amqp091.DeferredConfirmation implements it.
type DeferredConfirmation interface {
	// Done is closed once the broker confirmed (or refused) the publishing.
	Done() <-chan struct{}
	// Acked reports, without waiting, whether the publishing has been positively confirmed.
	Acked() bool
	// Wait waits for the confirmation and reports whether it was positive.
	Wait() bool
	// WaitContext waits for the confirmation or for ctx, whichever comes first.
	WaitContext(ctx context.Context) (bool, error)
}
