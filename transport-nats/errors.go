package natsjs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/settlehq/settle/core"
)

var (
	// ErrNotFound is matched (errors.Is) by a TopologyError for a stream or consumer the server
	// does not have, when settle only checks (DeclareTopology off) what a subscription needs, and
	// for a dead-letter subject that no stream captures.
	ErrNotFound = errors.New("not found on the server")
	// ErrMismatch is matched by a TopologyError for a stream or consumer that exists with other
	// settings than the endpoint declares.
	ErrMismatch = errors.New("exists with other settings")
	// ErrDeadLetterNotStored is the settlement error of a dead letter whose copy JetStream did not
	// acknowledge: the original is not terminated; it is held, then returned to be delivered again.
	ErrDeadLetterNotStored = errors.New("the dead-letter copy was not stored")
	// ErrSettlementUnknown is matched by the settlement error of an ack or a +TERM that was sent
	// and whose confirmation did not come: the answer did not arrive within RequestTimeout (or
	// the AckWait), the connection dropped, or the context ended while it waited. The server may
	// have applied it — the message is gone — or not — it comes back after its AckWait. It
	// matches core.ErrSettlementUnknown too, so core logs and reports such a settlement as
	// unknown, not failed. A frame that was never sent, or that the server refused ("no
	// responders": no consumer listens on the ack subject), is a failure and does not match it.
	ErrSettlementUnknown = fmt.Errorf("natsjs: %w", core.ErrSettlementUnknown)
)

// TopologyError reports a stream or consumer that is missing or that exists with other settings
// than the endpoint declares. It matches ErrNotFound or ErrMismatch with errors.Is and unwraps to
// the server's error, if there was one.
type TopologyError struct {
	// Kind is "stream", "consumer" or "dead-letter subject".
	Kind string
	// Name names it; a consumer's name is "stream/consumer".
	Name string
	// Missing is true when it does not exist; otherwise Diffs lists the differences.
	Missing bool
	// Diffs are the differing settings, each "setting: server X, declared Y".
	Diffs []string
	// Hint says what to do about it.
	Hint string
	// Err is the server's error, if any.
	Err error
}

// Error names the stream or consumer and says what is missing or different, and what to do.
func (e *TopologyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", e.Kind, e.Name)
	if e.Missing {
		b.WriteString(" does not exist")
	} else {
		b.WriteString(" exists with other settings: ")
		b.WriteString(strings.Join(e.Diffs, "; "))
	}
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is makes a TopologyError match ErrNotFound or ErrMismatch.
func (e *TopologyError) Is(target error) bool {
	return (target == ErrNotFound && e.Missing) || (target == ErrMismatch && !e.Missing)
}

// Unwrap returns the server's error, if there was one.
func (e *TopologyError) Unwrap() error { return e.Err }
