package core

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The headers a dead letter carries, on every backend that keeps headers (AMQP message headers,
// the headers column of a SQL row, NATS message headers). They carry no x- prefix: RabbitMQ
// reserves those for itself.
const (
	// HeaderRetryCount is the attempt count of a message, a decimal string: on a copy settle
	// publishes (a retry, a delayed copy, a dead letter) it is the number of deliveries the
	// message has had so far.
	HeaderRetryCount = "settle-retry-count"
	// HeaderOrigin names the queue a dead letter came from.
	HeaderOrigin = "settle-origin"
	// HeaderDeadAt is when the message was moved to its dead letter, RFC 3339 in UTC.
	HeaderDeadAt = "settle-dead-at"
	// HeaderError is the last failure of a dead letter (Reason), at most MaxReasonBytes.
	HeaderError = "settle-error"
)

// MaxReasonBytes bounds the reason a dead letter records: a handler's error text can be
// arbitrarily long (a wrapped HTTP body), a header or column should not be.
const MaxReasonBytes = 1024

// MaxCount is the largest attempt count settle reads from a header: counts above it are clamped
// to it (ParseCount). It is far above any cap a subscription can sensibly set, and far below the
// overflow of an int.
const MaxCount = 1 << 30

// ErrCountClamped is reported by ParseCount (with the clamped value) for a count above MaxCount.
var ErrCountClamped = errors.New("settle: attempt count above the bound, clamped")

// ParseCount reads an attempt count as settle writes it: a decimal string of digits, without a
// sign or leading zeros ("0" itself excepted). A count above MaxCount returns MaxCount and an
// error matching ErrCountClamped, so a caller can use the value and log the anomaly; any other
// malformed count returns 0 and an error that quotes it.
func ParseCount(s string) (int, error) {
	if s == "" {
		return 0, errors.New("settle: empty attempt count")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("settle: attempt count %q has a leading zero", truncate(s, 40))
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("settle: attempt count %q is not a decimal number", truncate(s, 40))
		}
		if n > MaxCount { // keep reading: a later non-digit still makes it malformed
			continue
		}
		n = n*10 + int(c-'0')
	}
	if n > MaxCount {
		return MaxCount, fmt.Errorf("%w: %q read as %d", ErrCountClamped, truncate(s, 40), MaxCount)
	}
	return n, nil
}

// DeadLetterError is the Cause of a dead-letter verdict that core resolved: why the message is
// dead. It wraps the handler's own error, so errors.Is still finds it.
type DeadLetterError struct {
	// Attempt is the delivery's attempt, Cap the subscription's DeadLetterAfter cap.
	Attempt, Cap int
	// Asked is what the handler asked for at the cap (a retry or retry-after); zero when the
	// message was moved without calling the handler.
	Asked Verdict
	// NotSettled is set when the message was delivered past the cap without any of its
	// deliveries ever settling (the process died, hung past its lease, or was stopped again
	// and again): core moves it without calling the handler.
	NotSettled bool
	// Err is the handler's cause (an outcome's Because, or the error it returned), if any.
	Err error
}

func (e *DeadLetterError) Error() string {
	if e.NotSettled {
		return fmt.Sprintf("not settled after %d attempts (cap %d)", e.Attempt-1, e.Cap)
	}
	s := fmt.Sprintf("%s at attempt %d of %d", e.Asked.String(), e.Attempt, e.Cap)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the handler's cause.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// Reason is the text a dead letter records as its last failure: the verdict's cause (for a cap
// core resolved, what was asked at which attempt and the handler's error), at most
// MaxReasonBytes of valid UTF-8. A verdict without a cause gives its action ("dead_letter").
func Reason(v Verdict) string {
	if v.Cause == nil {
		return v.String()
	}
	return truncate(v.Cause.Error(), MaxReasonBytes)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// DeadLetterInfo is why a message died, as its dead letter records it.
type DeadLetterInfo struct {
	// Count is how many deliveries the message had.
	Count int
	// Origin is the queue it came from.
	Origin string
	// At is when it was moved.
	At time.Time
	// Error is the last failure (Reason of the verdict).
	Error string
}

// NewDeadLetterInfo describes the move of delivery d from queue origin to its dead letter by
// verdict v at time at.
func NewDeadLetterInfo(d Delivery, v Verdict, origin string, at time.Time) DeadLetterInfo {
	return DeadLetterInfo{Count: d.Attempt(), Origin: origin, At: at.UTC(), Error: Reason(v)}
}

// Headers returns the dead-letter headers of i.
func (i DeadLetterInfo) Headers() map[string]string {
	h := make(map[string]string, 4)
	i.AddTo(h)
	return h
}

// AddTo sets the dead-letter headers of i in h, replacing earlier values.
func (i DeadLetterInfo) AddTo(h map[string]string) {
	h[HeaderRetryCount] = strconv.Itoa(max(i.Count, 0))
	h[HeaderOrigin] = i.Origin
	h[HeaderDeadAt] = i.At.UTC().Format(time.RFC3339Nano)
	h[HeaderError] = truncate(i.Error, MaxReasonBytes)
}

// ParseDeadLetterInfo reads the dead-letter headers of h. ok is false when h carries none of
// them; err reports a header that is present but malformed (the other fields are still read).
func ParseDeadLetterInfo(h map[string]string) (info DeadLetterInfo, ok bool, err error) {
	var errs []error
	if s, has := h[HeaderRetryCount]; has {
		ok = true
		n, e := ParseCount(s)
		info.Count = n
		if e != nil {
			errs = append(errs, fmt.Errorf("header %s: %w", HeaderRetryCount, e))
		}
	}
	if s, has := h[HeaderOrigin]; has {
		ok = true
		info.Origin = s
	}
	if s, has := h[HeaderDeadAt]; has {
		ok = true
		t, e := time.Parse(time.RFC3339Nano, s)
		if e != nil {
			errs = append(errs, fmt.Errorf("header %s: %q is not an RFC 3339 time", HeaderDeadAt, truncate(s, 40)))
		}
		info.At = t
	}
	if s, has := h[HeaderError]; has {
		ok = true
		info.Error = s
	}
	return info, ok, errors.Join(errs...)
}
