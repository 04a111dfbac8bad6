package redisq

import (
	"fmt"

	"github.com/settlehq/settle/core"
)

var _ core.Describer = (*Queue)(nil)

// Describe says what the queue is in Redis for sub (core.Describer): its stream, consumer group
// and companion keys, the settings it reads with, where a RetryAfter waits and where a dead
// letter goes. It reads configuration only.
func (q *Queue) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	c := &q.cfg
	s := map[string]any{
		"stream": c.stream, "group": c.group, "delayed_set": c.delayed, "dedup_hash": c.dedup,
		"lease": c.lease.String(), "block": c.block.String(), "delay_poll": c.poll.String(),
	}
	if c.batch > 0 {
		s["batch"] = c.batch
	}
	d := core.EndpointDescription{Backend: core.BackendRedis, Settings: s,
		Delay: fmt.Sprintf("in Redis: the sorted set %q, moved back to the stream by a script once due", c.delayed)}
	if sub.Cap > 0 {
		d.Related = append(d.Related, core.RelatedQueue{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo,
			About: "settle adds a dead letter to this stream with why it died in its settle-* fields, in the script that acknowledges the original."})
	}
	return d
}
