package amqptest

import (
	"fmt"

	"github.com/rabbitmq/amqp091-go"
)

// serverError builds the error RabbitMQ sends when it closes a channel or connection. Reason
// texts follow RabbitMQ 3.10's wording, so that code and tests matching on them behave the same
// on both brokers.
func serverError(code int, format string, args ...any) *amqp091.Error {
	text := ""
	switch code {
	case amqp091.ConnectionForced:
		text = "CONNECTION_FORCED"
	case amqp091.AccessRefused:
		text = "ACCESS_REFUSED"
	case amqp091.NotFound:
		text = "NOT_FOUND"
	case amqp091.ResourceLocked:
		text = "RESOURCE_LOCKED"
	case amqp091.PreconditionFailed:
		text = "PRECONDITION_FAILED"
	case amqp091.CommandInvalid:
		text = "COMMAND_INVALID"
	case amqp091.NotAllowed:
		text = "NOT_ALLOWED"
	case amqp091.NotImplemented:
		text = "NOT_IMPLEMENTED"
	}
	return &amqp091.Error{
		Code:    code,
		Reason:  text + " - " + fmt.Sprintf(format, args...),
		Server:  true,
		Recover: isSoft(code),
	}
}

// isSoft reports whether code is a channel-level ("soft") error, as amqp091-go classifies it.
func isSoft(code int) bool {
	switch code {
	case amqp091.ContentTooLarge, amqp091.NoRoute, amqp091.NoConsumers, amqp091.AccessRefused,
		amqp091.NotFound, amqp091.ResourceLocked, amqp091.PreconditionFailed:
		return true
	}
	return false
}

func noQueue(name string) *amqp091.Error {
	return serverError(amqp091.NotFound, "no queue '%s' in vhost '/'", name)
}

func noExchange(name string) *amqp091.Error {
	return serverError(amqp091.NotFound, "no exchange '%s' in vhost '/'", name)
}

func locked(name string) *amqp091.Error {
	return serverError(amqp091.ResourceLocked, "cannot obtain exclusive access to locked queue '%s' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name)
}

func defaultExchangeRefused() *amqp091.Error {
	return serverError(amqp091.AccessRefused, "operation not permitted on the default exchange")
}

// notify delivers err (if any) to every listener and closes it, never blocking the broker: a
// listener without room gets its value from a goroutine, as amqp091-go's reader would block.
func notify[T any](listeners []chan T, v T, send bool) {
	for _, c := range listeners {
		if !send {
			close(c)
			continue
		}
		select {
		case c <- v:
			close(c)
		default:
			go func() {
				c <- v
				close(c)
			}()
		}
	}
}
