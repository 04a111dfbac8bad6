package amqp

import "github.com/settlehq/settle/core"

// What a classic queue can count.
//
// A classic queue reports only whether a delivery is redelivered, not how often, and RabbitMQ
// sets that flag for two different things: a message an earlier delivery gave back unsettled
// (its channel or connection closed, or the consumer requeued it), and every message a node
// recovers after an unclean stop, delivered or not (RabbitMQ 3.10.8, kill -9 of the node with
// 1,000 messages in a classic queue and 50 of them delivered unacknowledged: all 980 left came
// back redelivered; after a graceful stop, the 50). A delivery does not say which, so settle
// counts only what it can prove:
//
//   - settle-retry-count, which settle raises on every copy it publishes (a retry with a cap, a
//     delayed retry), so each handler run that asked for a retry is counted by the copy it
//     made;
//   - plus one when the delivery is redelivered and this process handed the message out before
//     (this process or its earlier sessions, across reconnections): the consumer returned it
//     itself (a requeue, an abandoned delivery, an original held back after a refused copy), or
//     its settlement could not be sent because its channel closed (ErrChannelGone: a cut
//     connection, a broker stop or crash while it was in a handler). However often it came
//     back, that counts once.
//
// A redelivered flag on any other delivery is not counted: a message a broker restart
// recovered, one prefetched and never handed to a handler, one handed out by another process
// (a crashed one, or another instance). So a message that always fails reaches its dead letter
// after a handler ran each of the cap's attempts, broker crashes or not. What a classic queue
// cannot count: a run of a process that died before its settlement, or that a stopping process
// abandoned (the next process starts that message at the same attempt again), so a message
// that crashes the process is never stopped by the cap. Quorum queues count deliveries on the
// server; use them where that matters.

// What ownReturns records for a classic delivery: how it came back. Both count the redelivery;
// only a return the consumer made itself makes it not suspect (Delivery.Suspect).
const (
	classicRequeued = 1 // the consumer requeued it (a retry without a cap, an abandon, a hold)
	classicLost     = 2 // its channel closed under it (a cut, a broker stop or crash)
)

// lostWithChannel remembers a classic delivery that this process handed out and whose
// settlement could not be sent because its channel had closed: the broker gives it back, and
// its redelivery counts as the attempt it was.
func (c *consumer) lostWithChannel(d core.Delivery) {
	if c.cfg.quorum {
		return
	}
	c.returned.record(base(d).raw.MessageId, classicLost)
}
