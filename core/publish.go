package core

import (
	"context"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// This file is the publish SPI: what a backend implements so that core.Publisher publishes to
// it. A user never calls these methods; a backend's constructors (postgres.Queue, amqp.Exchange,
// natsjs.Subject, coretest.Broker.Queue) return Targets, and NewPublisher takes one.

// Target is a place messages are published to, made by a backend: a SQL queue table or group, an
// AMQP exchange and routing key, a JetStream subject, an in-memory queue. Every subscribable
// endpoint of a queue backend is also the Target of its own queue.
type Target interface {
	// Queue names the target, for logs, errors and receipts.
	Queue() string
	// Sender opens what publishing to the target needs (a channel in confirm mode, a prepared
	// statement). Core calls it once per Publisher, at its first publish; an error is returned by
	// that publish and Sender is called again at the next one. It must name the target.
	Sender(ctx context.Context) (Sender, error)
}

// Sender publishes messages to one Target. It is safe for concurrent use: one Publisher's
// Publish calls share it.
type Sender interface {
	// Send publishes msgs in order, as one round trip where the backend can (a multi-row INSERT,
	// pipelined confirms, asynchronous JetStream publishes), and returns one Receipt per message,
	// len(msgs) of them in the same order, once each message is durable (the SQL commit, or the
	// insert in the caller's transaction; the RabbitMQ confirm of a mandatory publish; the
	// JetStream PubAck) or has failed. An unroutable or refused message is a failure.
	//
	// Before it sends a message, Send reads the backend options it understands from
	// msg.Options with Ext and refuses the message with msg.Options.Unread's error when any is
	// left: an option of another backend is an error, never ignored. A core option the backend
	// cannot honour (a priority on a queue without priorities) is refused with an
	// *UnsupportedError in the message's Receipt, never ignored either.
	Send(ctx context.Context, msgs []Outgoing) []Receipt
	// Clock is the clock the backend's delays run on; core resolves Delay(d) into
	// Outgoing.NotBefore with it. Never nil.
	Clock() clock.Clock
}

// Outgoing is one message as core hands it to a Sender: encoded, its options validated and
// resolved.
type Outgoing struct {
	// ID is the MessageID option, or "" for the backend to assign one. A message published with
	// an ID is delivered with that Delivery.ID(), on every attempt and in its dead letter.
	ID string
	// Body is the encoded payload.
	Body []byte
	// ContentType is the codec's content type ("application/json").
	ContentType string
	// Headers are the caller's headers and the propagated trace context; nil when there are
	// none. The map is the sender's to keep: core does not touch it after Send.
	Headers map[string]string
	// CorrelationID is the CorrelationID option; "" for none.
	CorrelationID string
	// OrderingKey is the OrderingKey option; "" for none. A backend carries it to the
	// delivery (see Keyed).
	OrderingKey string
	// DedupKey is the DedupKey option; "" for none. While a message published with the same key
	// is still pending on the target, the backend stores nothing and reports the publish as a
	// Receipt.Duplicate.
	DedupKey string
	// NotBefore is the earliest time the message may be delivered, on the Sender's Clock; zero
	// delivers at once. Core resolves the Delay option into it.
	NotBefore time.Time
	// Priority is the Priority option, 1..255 with higher delivered first; 0 is the default.
	Priority int
	// Options are the message's options, for the backend's own ones (Ext). Never nil.
	Options *PublishOptions
}

// Receipt is the result of publishing one message.
type Receipt struct {
	// ID is the message id as the backend knows it: the MessageID given, or the one it
	// assigned (a SQL row id, a generated message-id). A backend that assigns ids documents
	// where they come from; they stay the message's id across retries, copies and dead letters.
	ID string
	// Duplicate is set when the message's DedupKey was still pending on the target: nothing new
	// was stored, and ID, where the backend knows it, is the pending message's.
	Duplicate bool
	// Err is why the message was not published; nil when it is durable (or a Duplicate).
	Err error
}

// Keyed is implemented by a delivery that carries the ordering key its message was published
// with (core.OrderingKey).
type Keyed interface {
	// OrderingKey returns the key, "" when the message has none.
	OrderingKey() string
}

// Correlated is implemented by a delivery that carries the correlation id its message was
// published with (core.CorrelationID).
type Correlated interface {
	// CorrelationID returns the id, "" when the message has none.
	CorrelationID() string
}

// OrderingKeyOf returns the ordering key d carries (see Keyed), "" when it carries none.
func OrderingKeyOf(d Delivery) string {
	if k, ok := d.(Keyed); ok {
		return k.OrderingKey()
	}
	return ""
}

// CorrelationIDOf returns the correlation id d carries (see Correlated), "" when it carries none.
func CorrelationIDOf(d Delivery) string {
	if c, ok := d.(Correlated); ok {
		return c.CorrelationID()
	}
	return ""
}
