package natsjs

import (
	"fmt"

	"github.com/settlehq/settle/core"
)

var _ core.Describer = (*Queue)(nil)

// Describe says what the queue is on JetStream for sub (core.Describer): its stream and durable
// consumer, the consumer settings settle declares or expects, and the dead-letter subject. It
// reads configuration only; settings not given explicitly are reported with the values settle
// declares (an existing consumer keeps its own).
func (q *Queue) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	c := &q.cfg
	ackWait := DefaultAckWait
	if c.ackWait > 0 {
		ackWait = c.ackWait
	}
	maxDeliver := -1
	switch {
	case c.maxDeliver > 0:
		maxDeliver = c.maxDeliver
	case sub.Cap > 0:
		maxDeliver = sub.Cap + BackstopMargin
	}
	s := map[string]any{
		"declare_topology": q.c.declare, "ack_wait": ackWait.String(), "max_deliver": maxDeliver,
		"confirm_acks": c.confirmAcks, "fetch_wait": c.fetchWait.String(),
	}
	if c.maxAckPending > 0 {
		s["max_ack_pending"] = c.maxAckPending
	}
	if c.fetchBatch > 0 {
		s["fetch_batch"] = c.fetchBatch
	}
	if c.replicas > 0 {
		s["replicas"] = c.replicas
	}
	if c.storage != nil {
		s["storage"] = c.storage.String()
	}
	if c.retention != nil {
		s["retention"] = c.retention.String()
	}
	d := core.EndpointDescription{Backend: core.BackendNATS, Settings: s,
		NATS:  &core.NATSQueue{Subject: c.subject, Stream: c.stream, Consumer: c.durable, Subjects: append([]string(nil), c.subjects...)},
		Delay: "server: a -NAK with the delay, held by JetStream"}
	if sub.Cap > 0 {
		about := fmt.Sprintf("settle publishes a dead letter to this subject with why it died in the settle-* headers, and terminates the original once JetStream has stored it; the consumer's max_deliver %d backs the cap up. A stream must capture the subject", maxDeliver)
		if q.c.declare {
			about += fmt.Sprintf(": settle declares one (%s, work-queue retention) when none does.", nameOf(sub.DeadLetterTo))
		} else {
			about += "."
		}
		d.Related = append(d.Related, core.RelatedQueue{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo, About: about})
	}
	return d
}
