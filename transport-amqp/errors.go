package amqp

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rabbitmq/amqp091-go"
)

var (
	// ErrNotFound is matched (errors.Is) by a TopologyError for an exchange or queue the server
	// does not have, when settle only checks (DeclareTopology off) what a subscription needs.
	ErrNotFound = errors.New("not found on the server")
	// ErrMismatch is matched by a TopologyError for an entity that exists with other
	// properties or arguments than the subscription declares.
	ErrMismatch = errors.New("exists with other arguments")
	// ErrChannelGone is the settlement error of a delivery whose channel closed before the
	// settlement could be sent. Nothing is sent on another channel (RabbitMQ would close it for
	// an unknown delivery tag); the broker returns the message to its queue by itself.
	ErrChannelGone = errors.New("the delivery's channel is closed; the broker returns the message")
	// ErrNotConfirmed is the error of a publishing RabbitMQ refused (nack: a full queue under
	// x-overflow reject-publish) or did not confirm before its channel closed: for a copy
	// (retry, waiting-queue or delayed copy, dead letter) under the Confirmed policy the
	// original is held back, not acknowledged, and returned to its queue.
	ErrNotConfirmed = errors.New("the broker did not confirm the publishing")
	// ErrUnroutable is matched by the *ReturnError of a mandatory publishing that reached no
	// queue (basic.return): for a copy the original is held back and returned, as for
	// ErrNotConfirmed.
	ErrUnroutable = errors.New("the broker routed the publishing to no queue")
)

// TopologyError reports an exchange or queue that is missing or that exists with other
// arguments than settle declares. It matches ErrNotFound or ErrMismatch with errors.Is and
// unwraps to the server's *amqp091.Error.
type TopologyError struct {
	// Kind is "queue" or "exchange".
	Kind string
	// Name names the entity.
	Name string
	// Declared are the arguments settle declared or expected, nil for none.
	Declared amqp091.Table
	// Err is the server's error (404 NOT_FOUND, 406 PRECONDITION_FAILED); its text names the
	// argument the server holds differently. Nil when settle found the difference itself.
	Err error
	// Problem says what settle found wrong with an existing entity it verified without
	// declaring (the wrong queue type, arguments a subscription needs and the queue lacks) and
	// how to fix it; empty when the server refused a declaration.
	Problem string
}

func (e *TopologyError) Error() string {
	if e.Problem != "" {
		return fmt.Sprintf("%s %q %s (expected %s)", e.Kind, e.Name, e.Problem, formatTable(e.Declared))
	}
	var ae *amqp091.Error
	code := 0
	if errors.As(e.Err, &ae) {
		code = ae.Code
	}
	switch code {
	case amqp091.NotFound:
		return fmt.Sprintf("%s %q does not exist (DeclareTopology is off, so settle only checks it: declare it, or turn DeclareTopology(true) on): %v", e.Kind, e.Name, e.Err)
	case amqp091.PreconditionFailed:
		return fmt.Sprintf("%s %q exists with other properties or arguments than declared here: declared %s; server: %v", e.Kind, e.Name, formatTable(e.Declared), e.Err)
	}
	return fmt.Sprintf("%s %q: %v", e.Kind, e.Name, e.Err)
}

// Is makes a TopologyError match ErrNotFound or ErrMismatch.
func (e *TopologyError) Is(target error) bool {
	if e.Problem != "" {
		return target == ErrMismatch
	}
	var ae *amqp091.Error
	if !errors.As(e.Err, &ae) {
		return false
	}
	return (target == ErrNotFound && ae.Code == amqp091.NotFound) ||
		(target == ErrMismatch && ae.Code == amqp091.PreconditionFailed)
}

func (e *TopologyError) Unwrap() error { return e.Err }

// formatTable renders arguments in key order, for error messages.
func formatTable(t amqp091.Table) string {
	if len(t) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%v (%T)", k, t[k], t[k])
	}
	b.WriteByte('}')
	return b.String()
}

// validName checks a queue, exchange or routing key against AMQP's 255-byte short string.
func validName(what, name string) error {
	if len(name) > 255 {
		return fmt.Errorf("%s %.40q… is %d bytes; AMQP allows at most 255", what, name, len(name))
	}
	return nil
}
