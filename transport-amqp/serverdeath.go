package amqp

import (
	"fmt"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
)

// serverDeath fills d from the x-death RabbitMQ wrote on a message it dead-lettered itself
// (settle's own dead letters carry core.DeadLetterInfo's headers instead): where and when it
// died, why, and — at a quorum queue's delivery limit — how many deliveries it had: the copies
// before it (settle-retry-count, which every copy settle publishes raises) plus the deliveries
// the queue counted. Those come from the dead letter's x-delivery-count where it carries one,
// otherwise from the queue's x-delivery-limit read from the server (RabbitMQ 3.10 delivers a
// message limit+1 times before it moves it; a limit set by a policy cannot be read over AMQP, and
// the count is then left unrecorded, 0, with the reason saying so).
func (o *Ops) serverDeath(m *amqp091.Delivery, d *ops.DeadLetter) {
	deaths, _ := Deaths(m.Headers)
	if len(deaths) == 0 {
		d.Reason = "dead-lettered by RabbitMQ (its x-death header does not say where or why)"
		return
	}
	last := deaths[0] // RabbitMQ puts the latest death first
	d.Origin = last.Queue
	if !last.Time.IsZero() {
		d.DeadAt = last.Time.UTC()
	}
	switch last.Reason {
	case "delivery_limit":
		copies, _ := retryCount(m.Headers)
		deliveries, how := o.deliveriesAtLimit(m.Headers, last.Queue)
		if deliveries > 0 {
			d.Count = min(copies+deliveries, core.MaxCount)
		}
		d.Reason = fmt.Sprintf("dead-lettered by RabbitMQ: quorum queue %q reached its delivery limit (%s) before settle moved it", last.Queue, how)
		if copies > 0 {
			d.Reason += fmt.Sprintf("; %d attempts before, counted by settle's copies", copies)
		}
	case "rejected":
		d.Reason = fmt.Sprintf("dead-lettered by RabbitMQ: rejected without requeue (a drop) in queue %q, through the queue's own dead-letter route", last.Queue)
	case "expired":
		d.Reason = fmt.Sprintf("dead-lettered by RabbitMQ: its time to live ran out in queue %q", last.Queue)
	case "maxlen":
		d.Reason = fmt.Sprintf("dead-lettered by RabbitMQ: queue %q was over its length limit", last.Queue)
	default:
		d.Reason = fmt.Sprintf("dead-lettered by RabbitMQ: %s in queue %q", last.Reason, last.Queue)
	}
	if last.Count > 1 {
		d.Reason += fmt.Sprintf(" (it died there %d times)", last.Count)
	}
}

// deliveriesAtLimit returns how many deliveries a message dead-lettered at queue's delivery
// limit had there, and how that is known (0 when it is not).
func (o *Ops) deliveriesAtLimit(h amqp091.Table, queue string) (int, string) {
	if _, ok := h["x-delivery-count"]; ok {
		if n, err := deliveryCount(h); err == nil && n > 0 {
			return n, fmt.Sprintf("%d deliveries, by its x-delivery-count", n)
		}
	}
	limit, ok := o.limitOf(queue)
	if !ok {
		return 0, "its delivery count unknown: the queue's x-delivery-limit could not be read"
	}
	return limit + 1, fmt.Sprintf("%d deliveries at x-delivery-limit %d", limit+1, limit)
}

// limitOf reads queue's x-delivery-limit from the server once per Ops (queueArguments).
func (o *Ops) limitOf(queue string) (int, bool) {
	o.limitMu.Lock()
	defer o.limitMu.Unlock()
	if n, ok := o.limits[queue]; ok {
		return n, n >= 0
	}
	n := -1
	if args, err := queueArguments(o.conn.Channel, queue, true, false); err == nil {
		if v, ok := args["x-delivery-limit"]; ok {
			if l, err := deliveryCount(amqp091.Table{"x-delivery-count": v}); err == nil {
				n = l
			}
		}
	}
	if o.limits == nil {
		o.limits = make(map[string]int)
	}
	o.limits[queue] = n
	return n, n >= 0
}
