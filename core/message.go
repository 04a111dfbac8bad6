package core

import "context"

// Message is a decoded delivery, as a typed handler receives it.
type Message[T any] struct {
	// Payload is the decoded body.
	Payload T
	d       Delivery
}

// NewMessage returns a Message over d with payload v; tests and custom dispatchers use it.
func NewMessage[T any](d Delivery, v T) *Message[T] { return &Message[T]{Payload: v, d: d} }

// ID identifies the message (a row id, an AMQP message id).
func (m *Message[T]) ID() string { return m.d.ID() }

// Attempt is the number of this delivery: 1 on the first.
func (m *Message[T]) Attempt() int { return m.d.Attempt() }

// Raw is the undecoded body.
func (m *Message[T]) Raw() []byte { return m.d.Body() }

// Headers returns the message's headers, nil when it has none.
func (m *Message[T]) Headers() map[string]string { return m.d.Headers() }

// Delivery is the backend's delivery; assert it to the backend's type for what only that
// backend knows (a RabbitMQ delivery's Redelivered, a quorum queue's delivery count).
func (m *Message[T]) Delivery() Delivery { return m.d }

// Handler is a typed handler. It returns nil to acknowledge the message, an outcome (Drop,
// Retry, RetryAfter) to say otherwise, or any other error to take the subscription's error policy.
type Handler[T any] func(ctx context.Context, m *Message[T]) error

// HandlerFunc is the untyped form of a handler that middleware wraps: it sees the delivery
// before decoding, and the error the typed handler (or the decoding) returned.
type HandlerFunc func(ctx context.Context, d Delivery) error

// Middleware wraps a HandlerFunc; middleware given to a subscription runs outermost first.
type Middleware func(HandlerFunc) HandlerFunc
