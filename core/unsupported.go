package core

import (
	"errors"
	"fmt"
)

// ErrUnsupported matches (errors.Is) every *UnsupportedError: an option the backend cannot
// honour. It wraps errors.ErrUnsupported, so the standard sentinel matches too.
var ErrUnsupported = fmt.Errorf("settle: option not supported by the backend: %w", errors.ErrUnsupported)

// UnsupportedError is how a backend refuses an option it cannot honour — a core publish option
// its queue cannot carry, or another backend's option — instead of ignoring it:
//
//	core.Priority on amqp quorum queue "q" (RabbitMQ 3.x): quorum queues of RabbitMQ before 4.0 have no priorities; use a classic queue with x-max-priority
type UnsupportedError struct {
	// Option names the option as a user writes it ("core.Priority", "postgres.InTx").
	Option string
	// Backend names the backend and the place, as its other errors do (`amqp quorum queue "q"
	// (RabbitMQ 3.x)`).
	Backend string
	// Reason says why the backend cannot honour it; may be empty.
	Reason string
	// Instead says what to use instead.
	Instead string
}

func (e *UnsupportedError) Error() string {
	s := e.Option + " on " + e.Backend
	if e.Reason != "" {
		s += ": " + e.Reason
	} else {
		s += ": not supported"
	}
	if e.Instead != "" {
		s += "; " + e.Instead
	}
	return s
}

// Unwrap returns ErrUnsupported, so that errors.Is(err, core.ErrUnsupported) (and
// errors.ErrUnsupported) holds.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }
