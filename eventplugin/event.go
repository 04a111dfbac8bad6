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

// String names e as sqlqueue names the event it stands for ("ack", "retry_after", …).
func (e Event) String() string {
	if k, ok := eventKind(e); ok {
		return k.String()
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Valid reports whether e is one of Events.
func (e Event) Valid() bool { return e >= EventClaim && e <= EventDeadLetter }
