package core

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy says what happens to a message whose handler failed without returning an outcome:
// returned a plain error, panicked, or could not decode the payload.
type Policy struct {
	kind      policyKind
	base, max time.Duration // PolicyBackoff
}

type policyKind uint8

const (
	policyRetry policyKind = iota + 1
	policyDrop
	policyDeadLetter
	policyBackoff
)

var (
	// PolicyRetry retries the message at once (the DeadLetterAfter cap still applies).
	PolicyRetry = Policy{kind: policyRetry}
	// PolicyDrop drops the message.
	PolicyDrop = Policy{kind: policyDrop}
	// PolicyDeadLetter moves the message straight to the subscription's dead letter, or drops
	// it when the subscription has none.
	PolicyDeadLetter = Policy{kind: policyDeadLetter}
)

// Backoff retries a failed message after an exponential backoff with full jitter: the delay
// of attempt n is drawn uniformly from [0, min(max, base·2ⁿ⁻¹)]. It becomes RetryAfter(delay)
// where the backend holds delays durably (a SQL table's retry_after column, a RabbitMQ waiting
// queue or the delayed-message exchange, JetStream's nak delay); elsewhere it retries at once,
// and the subscription logs a warning when it opens, because a delay kept in the process would
// be lost with it. The DeadLetterAfter cap still applies.
//
// The default policy stays an immediate retry (PolicyRetry); Backoff suits failures that are
// likely to pass with time (a rate limit, a dependency restarting).
func Backoff(base, max time.Duration) Policy {
	return Policy{kind: policyBackoff, base: base, max: max}
}

func (p Policy) String() string {
	switch p.kind {
	case policyRetry:
		return "retry"
	case policyDrop:
		return "drop"
	case policyDeadLetter:
		return "dead_letter"
	case policyBackoff:
		return fmt.Sprintf("backoff(%v, %v)", p.base, p.max)
	}
	return fmt.Sprintf("policy(%d)", uint8(p.kind))
}

func (p Policy) validate(what string) error {
	switch p.kind {
	case policyRetry, policyDrop, policyDeadLetter:
		return nil
	case policyBackoff:
		if p.base <= 0 || p.max < p.base {
			return fmt.Errorf("%s(Backoff(%v, %v)): need 0 < base <= max", what, p.base, p.max)
		}
		return nil
	}
	return fmt.Errorf("%s(%v): unknown policy (use PolicyRetry, PolicyDrop, PolicyDeadLetter or Backoff)", what, p)
}

// delay draws the backoff of attempt (1-based) with full jitter.
func (p Policy) delay(attempt int) time.Duration {
	d := p.base
	for i := 1; i < attempt && d < p.max; i++ {
		d *= 2
	}
	d = min(d, p.max)
	return time.Duration(rand.Int64N(int64(d) + 1))
}

func policyOption(what string, p Policy, set func(*Options)) Option {
	return OptionFunc(func(o *Options) error {
		if err := p.validate(what); err != nil {
			return err
		}
		set(o)
		return nil
	})
}

// OnError sets what happens when the handler returns an error that is not an outcome
// (default PolicyRetry).
func OnError(p Policy) Option {
	return policyOption("OnError", p, func(o *Options) { o.OnError = p })
}

// OnPanic sets what happens when the handler panics (default PolicyRetry; the stack is logged).
func OnPanic(p Policy) Option {
	return policyOption("OnPanic", p, func(o *Options) { o.OnPanic = p })
}

// OnDecodeError sets what happens to a payload the codec cannot decode (default
// PolicyDeadLetter: a payload that does not decode now will not decode on the next attempt).
func OnDecodeError(p Policy) Option {
	return policyOption("OnDecodeError", p, func(o *Options) { o.OnDecodeError = p })
}

// DelayHolder is implemented by a Finisher that keeps RetryAfter delays durably, on its server
// (a SQL table with a retry_after column, a RabbitMQ queue with a Delay, JetStream). Core turns
// a Backoff policy into RetryAfter only for such a backend.
type DelayHolder interface {
	HoldsDelays() bool
}
