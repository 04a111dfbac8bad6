package sqlqueue

import (
	"fmt"

	"github.com/settlehq/settle/core"
)

// Describe says what the queue is in its database for sub (core.Describer): its table, group
// and claim form, where a RetryAfter waits and where a dead letter goes. It reads configuration
// only.
func (q *queue) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	t := q.q.Schema.Table
	d := core.EndpointDescription{Backend: core.BackendSQL,
		SQL:   &core.SQLQueue{Table: t.Ref().String(), Group: q.q.Group, Form: q.form.String()},
		Delay: "none: without a retry_after column RetryAfter retries at once"}
	if t.Columns.RetryAfter != "" {
		d.Delay = fmt.Sprintf("in the table: the row's %s column", t.Columns.RetryAfter)
	}
	if sub.Cap > 0 {
		about := fmt.Sprintf("settle moves a dead letter to the group %q of table %s in the transaction that settles it", sub.DeadLetterTo, t.Ref())
		if q.q.Group == "" {
			about = fmt.Sprintf("settle copies a dead letter into the table %s in the transaction that settles it", sub.DeadLetterTo)
		}
		about += ", with why it died in its headers column where the table has one."
		d.Related = append(d.Related, core.RelatedQueue{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo, About: about})
	}
	return d
}
