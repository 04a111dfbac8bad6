package amqp

import (
	"fmt"
	"log/slog"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// A quorum queue's delivery limit.
//
// RabbitMQ counts every return of a quorum queue's message (x-delivery-count) and, once a
// message returns with an x-delivery-count at the queue's x-delivery-limit (RabbitMQ 3.10
// delivers a message limit+1 times), dead-letters it itself through the queue's dead-letter
// route, or discards it when there is none. With core.DeadLetterAfter(n, dest) the limit is
// n + BackstopMargin and the route is dest: settle moves the message at its cap itself, and the
// server takes over only for a message settle could not move. What settle says when one of its
// own returns (a retry, an abandon, an original held back after a refused copy) crosses the
// limit:
//
//   - no route: the server discards it; an ERROR line and a core.EventDiscarded
//     (returnsToDiscard);
//   - a route, after a refused copy: the server dead-letters it, at-least-once. While the route
//     refuses it too (the dead-letter queue deleted or full: often the very destination whose
//     refusal held the original back), RabbitMQ keeps it in the queue, not ready, out of every
//     consumer's sight and out of the ready count, and tries again on a timer of minutes. An
//     ERROR line says so instead of "returned to the queue", CopyStats.ServerMoved counts it, and
//     Ops counts it as DeadLettering through the management API (OpsCounts).

// logLimit says, at the start of a quorum subscription without a cap, what the server does with
// a message returned past the queue's delivery limit, and sets the consumer's limit and route:
// a WARN when there is no dead-letter route (RabbitMQ 4's default of 20 applies to every quorum
// queue, so an uncapped retry loop ends in a discard), INFO otherwise.
func (c *consumer) logLimit() {
	limit, known, routed := c.cfg.limit, true, c.cfg.dlx != nil
	route := ""
	if routed {
		route = fmt.Sprintf("exchange %q, routing key %q", c.cfg.dlx[0], c.cfg.dlx[1])
	}
	if !c.b.declare {
		// The queue is its owner's: read the limit and route it has, not the ones settle would
		// declare (a policy may add a route settle cannot see; it is not assumed).
		srv := c.topo.server
		var ex any
		ex, routed = srv["x-dead-letter-exchange"]
		route = fmt.Sprintf("exchange %q", ex)
		v, ok := srv["x-delivery-limit"]
		n, err := deliveryCount(amqp091.Table{"x-delivery-count": v})
		limit, known = n, srv != nil && ok && err == nil
	}
	switch {
	case !known:
		c.log.Info("amqp: quorum queue without a cap, declared elsewhere with no delivery limit settle can read; the server dead-letters or discards a message after its limit, if it has one")
		return
	case routed:
		c.log.Info("amqp: quorum queue without a cap; the server dead-letters a message returned past its delivery limit through the queue's dead-letter route",
			"delivery_limit", limit)
	default:
		c.log.Warn("amqp: quorum queue without a cap or a dead-letter route; the server discards a message returned past its delivery limit (each is logged as an error); give the subscription core.DeadLetterAfter or the queue a dead-letter route",
			"delivery_limit", limit)
	}
	c.limit, c.routed, c.route = limit, routed, route
}

// pastLimit reports the x-delivery-count of a quorum delivery whose return the server will not
// deliver again: it reached the queue's delivery limit.
func (c *consumer) pastLimit(d core.Delivery) (int, bool) {
	q, ok := d.(*QuorumDelivery)
	if !ok || c.limit < 0 || q.count < c.limit {
		return 0, false
	}
	return q.count, true
}

// returnsToDiscard reports a delivery about to be returned (a retry, an abandon, an original held
// back) that the server will discard instead of delivering again: its delivery count reached
// the limit of a quorum queue with no dead-letter route. Settle cannot keep it; it says so,
// once per message, with an ERROR line and an EventDiscarded.
func (c *consumer) returnsToDiscard(d core.Delivery, v core.Verdict) {
	count, past := c.pastLimit(d)
	if !past || c.routed {
		return
	}
	err := fmt.Errorf("quorum queue %q: x-delivery-count %d reached its delivery limit %d with no dead-letter route: RabbitMQ discards the message on this return", c.cfg.name, count, c.limit)
	c.log.Error("amqp: message returned past the quorum queue's delivery limit is discarded by the server (no dead-letter route)",
		"message_id", d.ID(), "attempt", d.Attempt(), "delivery_count", count, "delivery_limit", c.limit, "outcome", v.Action.String())
	c.report(core.Event{Kind: core.EventDiscarded, MessageID: d.ID(), Attempt: d.Attempt(), Err: err})
}

// movedByServer says what happened to the original of a refused copy to dest that was held
// back and has just been returned past the delivery limit (pastLimit): the server dead-letters it
// (an ERROR line, rate-limited, and CopyStats.ServerMoved) or, without a route, discards it
// (returnsToDiscard's line and event).
func (c *consumer) movedByServer(d core.Delivery, v core.Verdict, dest string, err error) {
	count, past := c.pastLimit(d)
	if !past {
		return
	}
	if !c.routed {
		c.returnsToDiscard(d, v)
		return
	}
	c.b.copies.serverMoved.Add(1)
	if log, quiet := c.moved.allow(c.clock.Now()); log {
		c.log.Error("amqp: a copy was not taken by the broker and its original, returned, passed the quorum queue's delivery limit: RabbitMQ dead-letters it itself; while the dead-letter route refuses it too, RabbitMQ keeps it in the queue, not ready and out of every consumer's sight, and tries again later (amqp.Ops counts it as dead-lettering with amqp.OpsCounts)",
			"message_id", d.ID(), "attempt", d.Attempt(), "action", v.Action.String(), "to", dest, "error", err,
			"delivery_count", count, "delivery_limit", c.limit, "dead_letter_route", c.route,
			"not_logged_since_last", quiet, "stats", slog.AnyValue(c.b.CopyStats()))
	}
}
