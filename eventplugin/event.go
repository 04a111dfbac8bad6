package eventplugin

import "strconv"

// Event is a queue event whose statement a plugin can render in place of the dialect's.
type Event uint8

const (
	// EventClaim takes ready rows.
	EventClaim Event = iota + 1
	// EventAck settles a row as done.
	EventAck
	// EventDrop settles a row as not to be processed again.
	EventDrop
	// EventRetry returns a row for another attempt.
	EventRetry
	// EventRetryAfter returns a row for another attempt after a delay.
	EventRetryAfter
	// EventDeadLetter moves a row to its dead letter.
	EventDeadLetter
)

// Events lists every event, in order.
var Events = []Event{EventClaim, EventAck, EventDrop, EventRetry, EventRetryAfter, EventDeadLetter}

func (e Event) String() string {
	switch e {
	case EventClaim:
		return "claim"
	case EventAck:
		return "ack"
	case EventDrop:
		return "drop"
	case EventRetry:
		return "retry"
	case EventRetryAfter:
		return "retry_after"
	case EventDeadLetter:
		return "dead_letter"
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Valid reports whether e is one of Events.
func (e Event) Valid() bool { return e >= EventClaim && e <= EventDeadLetter }
