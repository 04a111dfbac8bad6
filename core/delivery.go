package core

// Delivery is one message as a backend handed it out: its identity, its attempt number and its
// bytes, plus whatever the backend's Finisher needs to settle it (a row token, a transaction, a
// channel and delivery tag), which the backend keeps in its own concrete type.
//
// A backend's delivery type may offer more (a RabbitMQ delivery reports Redelivered); a handler
// reaches it with a type assertion on Message.Delivery().
type Delivery interface {
	// ID identifies the message in logs: a row id, an AMQP message id.
	ID() string
	// Attempt is the number of this delivery, 1 on the first. Where the backend counts attempts
	// (SQL tables, classic AMQP queues) it is the count the cap is compared with.
	Attempt() int
	// Body is the raw payload.
	Body() []byte
	// Headers returns the message's headers, nil when it has none. The map is the caller's.
	Headers() map[string]string
}
