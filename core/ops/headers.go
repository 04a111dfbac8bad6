package ops

import (
	"maps"

	"github.com/settlehq/settle/core"
)

// ReadHeaders fills d's Count, Origin, DeadAt and Reason from the dead-letter headers in
// d.Headers (core.ParseDeadLetterInfo), leaving the fields the headers do not carry as they
// are. A malformed header is returned as an error; the well-formed ones are still read.
func (d *DeadLetter) ReadHeaders() error {
	info, ok, err := core.ParseDeadLetterInfo(d.Headers)
	if !ok {
		return nil
	}
	if _, has := d.Headers[core.HeaderRetryCount]; has {
		d.Count = info.Count
	}
	if info.Origin != "" {
		d.Origin = info.Origin
	}
	if !info.At.IsZero() {
		d.DeadAt = info.At
	}
	if info.Error != "" {
		d.Reason = info.Error
	}
	return err
}

// RedriveHeaders returns the headers a redriven copy of a dead letter carries: h without the
// dead-letter headers (settle-origin, settle-dead-at, settle-error), and without
// settle-retry-count unless keepAttempts. h is not changed.
func RedriveHeaders(h map[string]string, keepAttempts bool) map[string]string {
	out := maps.Clone(h)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, core.HeaderOrigin)
	delete(out, core.HeaderDeadAt)
	delete(out, core.HeaderError)
	if !keepAttempts {
		delete(out, core.HeaderRetryCount)
	}
	return out
}
