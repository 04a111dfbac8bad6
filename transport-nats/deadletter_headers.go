package natsjs

import (
	"strconv"
	"time"

	"github.com/settlehq/settle/core"
)

// addDeadLetterHeaders sets the dead-letter headers of a copy of d moved by verdict v: the final
// count, the origin queue, the time and the last failure.
func addDeadLetterHeaders(h map[string]string, d core.Delivery, v core.Verdict, origin string, at time.Time) {
	h["settle-retry-count"] = strconv.Itoa(d.Attempt())
	h["settle-origin"] = origin
	h["settle-dead-at"] = at.UTC().Format("2006-01-02T15:04:05.000000Z")
	if v.Cause != nil {
		r := v.Cause.Error()
		if len(r) > 1024 {
			r = r[:1024]
		}
		h["settle-error"] = r
	}
}
