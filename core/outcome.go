package core

import (
	"errors"
	"strconv"
	"time"
)

// OutcomeKind is what a handler asked for when it returned an outcome error.
type OutcomeKind uint8

const (
	// OutcomeDrop removes the message for good (on RabbitMQ the queue's own DLX may take it).
	OutcomeDrop OutcomeKind = iota + 1
	// OutcomeRetry returns the message for another attempt.
	OutcomeRetry
	// OutcomeRetryAfter returns the message for another attempt no earlier than a delay.
	OutcomeRetryAfter
)

func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDrop:
		return "drop"
	case OutcomeRetry:
		return "retry"
	case OutcomeRetryAfter:
		return "retry_after"
	}
	return "outcome(" + strconv.Itoa(int(k)) + ")"
}

// Outcome is the error a handler returns to say what should happen to its message. Returning
// nil acknowledges the message; Drop, Retry and RetryAfter return outcomes, and Because attaches
// a cause. An Outcome survives wrapping: errors.As(err, &o) recovers it from fmt.Errorf("...: %w", o).
type Outcome struct {
	kind  OutcomeKind
	delay time.Duration
	cause error
}

// The outcomes without a cause are shared values: returning one allocates nothing.
var (
	dropOutcome  = &Outcome{kind: OutcomeDrop}
	retryOutcome = &Outcome{kind: OutcomeRetry}
)

// Drop removes the message for good. It is not retried and does not go to settle's dead letter
// (a RabbitMQ queue's own dead-letter exchange still takes a rejected message).
func Drop() *Outcome { return dropOutcome }

// Retry returns the message for another attempt. At the subscription's DeadLetterAfter cap it
// goes to the dead letter instead.
func Retry() *Outcome { return retryOutcome }

// RetryAfter returns the message for another attempt no earlier than d from now. A negative d
// counts as zero. At the DeadLetterAfter cap it goes to the dead letter instead.
func RetryAfter(d time.Duration) *Outcome {
	if d < 0 {
		d = 0
	}
	return &Outcome{kind: OutcomeRetryAfter, delay: d}
}

// Because returns a copy of o that carries cause; the cause is logged and matched by errors.Is.
func (o *Outcome) Because(cause error) *Outcome {
	c := *o
	c.cause = cause
	return &c
}

// Kind reports which outcome o is.
func (o *Outcome) Kind() OutcomeKind { return o.kind }

// Delay is the delay of a RetryAfter outcome, zero for the others.
func (o *Outcome) Delay() time.Duration { return o.delay }

// Unwrap returns the cause given to Because.
func (o *Outcome) Unwrap() error { return o.cause }

func (o *Outcome) Error() string {
	s := o.kind.String()
	if o.kind == OutcomeRetryAfter {
		s += "(" + o.delay.String() + ")"
	}
	if o.cause != nil {
		s += ": " + o.cause.Error()
	}
	return s
}

// AsOutcome recovers the outcome from err, which may wrap it.
func AsOutcome(err error) (*Outcome, bool) {
	var o *Outcome
	if errors.As(err, &o) && o != nil {
		return o, true
	}
	return nil, false
}
