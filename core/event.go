package core

import "time"

// EventKind names something a subscription's backend or core reports that is not a settlement:
// the things an operator counts (refused copies, reconnections) or is warned about.
type EventKind string

const (
	// EventHandlerOverran: a handler was still running TimeoutGrace after its Timeout.
	EventHandlerOverran EventKind = "handler_overran"
	// EventSettlementFailed: a settlement could not be made durable; the message returns as
	// an abandoned one would.
	EventSettlementFailed EventKind = "settlement_failed"
	// EventSettlementUnknown: a settlement was sent but its confirmation was lost
	// (ErrSettlementUnknown): the message is gone if the server applied it, and returns as an
	// abandoned one would if it did not.
	EventSettlementUnknown EventKind = "settlement_unknown"
	// EventCopyRefused: the broker refused or could not route a copy settle published (a retry,
	// a delayed copy, a dead letter); the original was left unacknowledged.
	EventCopyRefused EventKind = "copy_refused"
	// EventReconnected: the subscription's connection or consumer was lost and made again.
	EventReconnected EventKind = "reconnected"
	// EventSourceFailed: taking the next delivery failed; core retries after a backoff.
	EventSourceFailed EventKind = "source_failed"
	// EventDiscarded: settle returned a message that the server then discards by its own rule
	// (a RabbitMQ quorum queue at its delivery limit with no dead-letter route). Settle cannot
	// keep it; the queue's configuration can (a cap, or a dead-letter route).
	EventDiscarded EventKind = "discarded"
)

// Event is one report of an EventKind. Backends fill what they know.
type Event struct {
	Kind EventKind
	// Subscription and Queue name where it happened (core fills them for a subscription's
	// backend).
	Subscription, Queue string
	// MessageID and Attempt identify the message concerned, if any.
	MessageID string
	Attempt   int
	// Err is the error behind it, if any.
	Err error
	// At is when it happened, on the App's clock.
	At time.Time
}

// EventObserver is told of every Event of the App. It runs on the reporting goroutine: it must
// be quick and must not block.
type EventObserver func(Event)

// WithEventObserver adds an observer of the App's events (metrics exporters count them).
func WithEventObserver(o EventObserver) AppOption {
	return func(a *App) { a.events = append(a.events, o) }
}
