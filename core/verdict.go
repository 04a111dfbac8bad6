package core

import (
	"strconv"
	"time"
)

// Action is what a backend is asked to do with one delivery.
type Action uint8

const (
	// ActAck settles the message as done.
	ActAck Action = iota + 1
	// ActDrop settles the message as not to be processed again.
	ActDrop
	// ActRetry returns the message for another attempt.
	ActRetry
	// ActRetryAfter returns the message for another attempt after Verdict.Delay.
	ActRetryAfter
	// ActDeadLetter moves the message to Verdict.Dest.
	ActDeadLetter
	// ActAbandon gives the delivery back without settling it: the handler never finished
	// (its context ended, the service is shutting down). The row or message returns as the
	// backend's form allows (rollback, lease released, lock dropped, channel requeue), with no
	// attempt charged beyond what taking it already charged.
	ActAbandon
)

func (a Action) String() string {
	switch a {
	case ActAck:
		return "ack"
	case ActDrop:
		return "drop"
	case ActRetry:
		return "retry"
	case ActRetryAfter:
		return "retry_after"
	case ActDeadLetter:
		return "dead_letter"
	case ActAbandon:
		return "abandon"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Verdict is a resolved outcome: what the Finisher performs on one delivery. Core produces it
// from the handler's return value, the subscription's policies and its DeadLetterAfter cap.
type Verdict struct {
	Action Action
	// Delay is set for ActRetryAfter.
	Delay time.Duration
	// Dest is the dead-letter destination for ActDeadLetter (a group, table or queue name).
	Dest string
	// Cause is the error the handler returned, if any; for logs.
	Cause error
	// Replies are set on an ActAck for a Finisher that is a ReplySettler: the replies the
	// handler produced to the targets it settles, to publish atomically with the ack, in order.
	Replies []Reply
}

func (v Verdict) String() string {
	switch v.Action {
	case ActRetryAfter:
		return "retry_after(" + v.Delay.String() + ")"
	case ActDeadLetter:
		return "dead_letter(" + v.Dest + ")"
	}
	return v.Action.String()
}
