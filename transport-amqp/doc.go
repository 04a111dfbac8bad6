// Package amqp is settle's RabbitMQ transport (folder transport-amqp, package amqp), built on
// github.com/rabbitmq/amqp091-go.
//
// # Queues
//
// A Broker is one connection, registered with the App. Queues are endpoints of two distinct
// types, so that what one kind cannot do is not expressible on it:
//
//   - Classic(b, "refunds", ...) — RabbitMQ does not count deliveries; settle does, in the
//     settle-retry-count header (RetryCountHeader). Under core.DeadLetterAfter(n, dest) a retry
//     below the cap publishes a copy back to the queue (default exchange, routing key = queue)
//     with the count raised by one, then acknowledges the original. At the cap the copy goes to
//     dest (default exchange, routing key = dest) carrying the final count and why it died.
//     Without a cap a retry is a plain requeue.
//   - Quorum(b, "payouts", ...) — the server counts (x-delivery-count). A retry is a plain
//     requeue; core.DeadLetterAfter(n, dest) needs DeclareTopology(true) and becomes queue
//     arguments: x-queue-type=quorum, x-delivery-limit=n+BackstopMargin,
//     x-dead-letter-exchange="", x-dead-letter-routing-key=dest,
//     x-dead-letter-strategy=at-least-once and x-overflow=reject-publish. settle itself moves a
//     message at its cap (a confirmed copy with its count and reason; a delivery past the cap
//     goes there without its handler). The delivery limit, BackstopMargin (10) deliveries
//     further, is the backstop for a message settle cannot move — its dead-letter copies refused
//     again and again, or its deliveries dying with their processes — and lies far enough from
//     the cap that the returns settle makes itself after refused copies do not reach it. A
//     message the server moves carries x-death and no settle headers: Deaths reads it, and Ops
//     shows its count and reason. Without a cap the queue gets an explicit x-delivery-limit of
//     DefaultDeliveryLimit (RabbitMQ 4's default), settable with DeliveryLimit, which needs a
//     DeadLetterExchange route. Without a route RabbitMQ discards a message returned past that
//     limit (an uncapped retry loop ends there): the subscription logs a WARN when it starts,
//     and each return the server will discard is an ERROR line (queue, message id, attempt) and
//     a core.EventDiscarded (settle.messages.discarded in settle's OpenTelemetry metrics).
//
// # Outcomes
//
//	ack              basic.ack (coalesced, see below)
//	drop             basic.reject requeue=false; the queue's own DLX (DeadLetterExchange) takes it
//	retry            classic with a cap: copy with the count raised, then ack; otherwise
//	                 basic.reject requeue=true
//	retry after d    a copy with the count raised waits d (see Delays), then the original is acked
//	dead letter      copy to the destination carrying the final count and reason, then ack
//	abandoned        the consumer is cancelled, then basic.reject requeue=true: it comes back
//
// A drop on a quorum queue with a cap is acknowledged instead of rejected: that queue's
// dead-letter route is settle's dead letter, which keeps only messages that spent their
// attempts. A delayed copy is a new message with its count raised, so the cap stops a delayed
// loop like an immediate one, on quorum queues too (the count is settle-retry-count +
// x-delivery-count + 1). An abandoned delivery (the App stopping under a running handler)
// first cancels the subscription's consumer, so that the returned message is not sent again to
// the stopping consumer: on a quorum queue an abandon spends exactly one attempt, and a message
// abandoned cap times goes to the dead letter without its handler ("not settled after N
// attempts").
//
// # Copies and publish policies
//
// Every copy settle publishes — a retry copy, a waiting-queue or delayed-exchange copy, a dead
// letter; on classic and quorum queues — follows the queue's PublishPolicy (PublishWith):
//
//   - Confirmed (the default): the copy is published mandatory on one of the Broker's
//     confirm-mode channels, and the original is acknowledged only once RabbitMQ confirmed it.
//     A copy RabbitMQ returns (no queue bound: the dead letter or waiting queue was deleted,
//     *ReturnError, ErrUnroutable), refuses (nack: a full queue under x-overflow reject-publish,
//     ErrNotConfirmed) or does not confirm before its channel closes leaves the original
//     unacknowledged: the settlement fails with that error, and the original is held back for a
//     wait that doubles with each consecutive failure of copies to the same destination
//     (CopyRetryBackoff, default 1s to 30s, on the Broker's clock) and is then rejected with
//     requeue. So a refused copy never becomes an immediate redelivery loop; the failure is
//     logged at error level at most once per 10 s per subscription (with how many were not
//     logged) and counted in Broker.CopyStats. Nothing is lost: the message stays in its queue
//     until a copy is taken. Copies to a delayed-message exchange (amqpdme) are confirmed but
//     not mandatory (RoutesLater: the plugin routes only when the delay is over, and RabbitMQ
//     would return every one).
//   - FireAndForget (opt-in): the copy is published mandatory on the delivery's own channel and
//     the original acknowledged right after it, without waiting. A crash between the two
//     duplicates. Its loss window: a copy RabbitMQ does not take is lost, because its original
//     is already acknowledged — one returned unroutable or refused by a full queue under
//     reject-publish (both counted in CopyStats.Lost and logged at error level, at most once
//     per 10 s per subscription: the channel is in confirm mode so that refusals are seen, and
//     nothing waits for them), one in flight when the connection drops (not seen). It saves
//     one confirmation round trip per failing message only: the acknowledgement path of
//     messages that succeed is the same under both policies.
//
// Broker.CopyStats reports Published, Refused, Returned, Failed (originals held back and
// returned), ServerMoved (originals whose return passed a quorum queue's delivery limit, see
// below) and Lost (FireAndForget) copies since the Broker was created, for metrics.
//
// # Attempts
//
// m.Attempt() is 1 on the first delivery. On a quorum queue it is settle-retry-count +
// x-delivery-count + 1 (QuorumDelivery.RedeliveryCount reports x-delivery-count), counted when
// the message is taken. A classic queue reports only whether a message was delivered before
// (Delivery.Redelivered), and RabbitMQ also sets that flag on every message a node recovers
// after an unclean stop, delivered or not. So settle counts only what it can prove: a classic
// attempt is settle-retry-count + 1, plus one when the delivery is redelivered and this process
// handed the message out before — it requeued it itself (a retry without a cap, an abandon, an
// original held back after a refused copy), or the settlement found the delivery's channel
// closed (a cut, a broker stop or crash under a running handler). However often it came back,
// that counts once. A flag on any other delivery (a message recovered by a broker restart, one
// prefetched and never handed out, one another process had) counts nothing, so a message that
// always fails is dead-lettered after a handler ran each of the cap's attempts, broker crashes
// or not. A classic queue cannot count a handler run whose process died before settling: a
// crash loop on a classic queue is bounded only by whoever stops it; use a quorum queue where
// that matters.
//
// Count headers are read strictly: settle-retry-count is a decimal string of digits (no sign,
// no leading zero, as core.ParseCount reads it) — anything else counts as 0 and is logged, and
// a value above core.MaxCount is clamped to it and logged; x-delivery-count is read within
// [0, core.MaxCount] (a negative one as 0), logged when outside. Copies keep the body, content
// type, message and correlation ids and the user's headers; they never carry the broker's
// x-death, x-first-death-*, x-last-death-*, x-delivery-count or x-delay headers, which describe
// another message's history (and which RabbitMQ 3.13+ ignores when set by a client).
//
// # Dead letters
//
// settle's dead letters carry core.DeadLetterInfo's headers: settle-retry-count (the final
// count), settle-origin, settle-dead-at and settle-error (the outcome's cause or error text, at
// most 1 KiB); read them with core.ParseDeadLetterInfo. A message RabbitMQ moved by itself (a
// quorum queue's delivery-limit backstop, a queue's own DeadLetterExchange) carries x-death:
// Deaths reads it, and Ops (the operations view, and the settle command) shows where, when and
// why it died and, at a delivery limit, its count: the copies before it (its
// settle-retry-count) plus the deliveries the queue counted (x-delivery-count where the dead
// letter carries it, otherwise the queue's x-delivery-limit + 1, read from the server).
//
// # When the server takes over
//
// A quorum queue dead-letters a message itself when one of its returns passes the delivery
// limit. settle says so whenever the return is its own: a retry or an abandon on a queue
// without a dead-letter route is discarded (an ERROR line and a core.EventDiscarded); an
// original held back after a refused copy and then returned past the limit is dead-lettered by
// RabbitMQ, at-least-once. When the dead-letter route refuses it as well (the dead-letter queue
// deleted or full, often the very destination whose refusal held the original back), RabbitMQ
// keeps it in the queue — not ready, delivered to no consumer, missing from the ready count —
// and tries again on a timer of minutes, for as long as the route refuses it. Nothing is lost,
// but nothing a consumer sees shows it either: settle logs an ERROR line saying so (at most
// once per 10 s per subscription), counts it in CopyStats.ServerMoved, and Ops counts it as
// Stats.DeadLettering when it has the management plugin's figures (OpsCounts with
// ManagementAPI: a passive queue.declare counts ready messages only).
//
// # Delays
//
// Without a delay backend a RetryAfter copy waits in the process (core.InProcessDelay):
// at-most-once, and lost if the service stops during the delay; a subscription that starts
// says so in its log. A copy the broker does not take when it is due (the connection is down,
// the queue refuses or cannot route it) stays in the process and is tried again after the
// Broker's CopyRetryBackoff, doubling, until the broker takes it or the Broker closes. DLXTTL (DLXTTLNamed) parks the copy in a waiting queue with a
// per-message expiration; amqpdme parks it in a delayed-message exchange.
//
// # At-least-once broker dead-lettering
//
// Every move RabbitMQ makes on settle's behalf is at-least-once, so that a broker stop or crash
// in the middle of one loses nothing: quorum queues with a dead-letter route (a cap, or
// DeadLetterExchange) declare x-dead-letter-strategy=at-least-once, and waiting queues are
// quorum queues with the same strategy (for classic subscriptions too; per-message TTL on
// quorum queues needs RabbitMQ 3.10+, and expires only at the head, as on classic queues).
// RabbitMQ honours the strategy only with x-overflow=reject-publish, which settle declares with
// it. What that changes for publishers: nothing while the queue has no length limit
// (x-max-length, x-max-length-bytes); with one, a publishing past it is refused — nacked under
// publisher confirms, dropped silently without them — instead of the oldest message being
// dropped. Classic queues have no at-least-once dead-lettering: a classic queue's own
// DeadLetterExchange route stays at-most-once.
//
// An acknowledgement has no confirmation in AMQP 0-9-1. A settlement reports success once its
// frame is written; if RabbitMQ then drops it (a quorum queue without a known leader logs
// "leader cast - leader not known. Command is dropped."), the message stays with the consumer
// until its channel closes and is delivered again: a duplicate, never a loss, and on a quorum
// queue the extra delivery counts towards the cap.
//
// # Topology
//
// With DeclareTopology(true) each subscription declares its exchanges (Bind), queue with its
// arguments (Durable, Exclusive, AutoDelete, Arguments, DeadLetterExchange), bindings, waiting
// queue and the cap's dead-letter queue (a durable classic queue when missing), idempotently,
// at start and after every reconnection. A queue that exists with other arguments fails with a
// *TopologyError (ErrMismatch) showing the arguments declared and the server's account of the
// difference. Off (the default), the subscription checks that its queue and dead-letter queue
// exist (ErrNotFound) and reads the queue's arguments back without declaring anything (it
// redeclares the queue with an unknown x-queue-type, which RabbitMQ refuses to create, and
// learns each argument from the server's account of the difference): a Classic descriptor on a
// quorum queue, a Quorum one on a classic queue, and a waiting queue that is not a quorum queue
// dead-lettering at-least-once back to its queue are refused with a *TopologyError naming what
// is missing and how to fix it. Names and routing keys over 255 bytes are refused.
//
// # Throughput and faults
//
// Prefetch(n) sets basic.qos per subscription; core.Workers(n) runs handlers concurrently.
// Each channel the subscription consumes on starts with one unacknowledged delivery and keeps it
// while the deliveries that arrive are suspect (Delivery.Suspect: returned by a crash, not by
// the consumer itself); the first clean delivery opens the full window. So a message that crashes
// the process charges its later crashes to itself alone instead of to every message prefetched
// beside it (the package README has the details and what remains). With several consumers on
// one quorum queue, a message one consumer's crash returned may wait in another's open window
// (it is handed out ahead of the clean deliveries received before it, so only for the handlers
// already running) and be charged again by that one's crash: on a quorum queue each crash charges a message at
// most once, so run one consumer per queue or raise the cap by the number of consumers where a
// neighbour's crash must not cost an attempt. Acknowledgements are coalesced: a contiguous run of settled delivery tags goes out as one
// basic.ack with multiple=true when a prefetch's worth (at most 128) has settled or 2ms after the first
// (rejections go out at once, one per message).
//
// When the channel or connection drops, the consumer reconnects with backoff on the clock
// (ReconnectBackoff), redeclares when declaring, consumes again and logs each step. Deliveries
// carry their channel's epoch: a settlement for a delivery of a closed channel is never sent on
// the new one (RabbitMQ would close it for an unknown delivery tag); it fails with
// ErrChannelGone and the broker returns the message by itself. Nothing acknowledged is lost; a
// message whose acknowledgement was lost with the connection comes back (at-least-once): AMQP
// 0-9-1 does not confirm acknowledgements, so a settlement reports that its frame was written,
// not that the broker applied it, and a frame lost with a killed process or a cut connection
// means the handler runs again.
//
// # Clusters
//
// URLs(node1, node2, node3) dials a cluster's nodes in turn, so a Broker whose node goes down
// reconnects to another. Use quorum queues (replicated on the cluster's nodes) for the queues,
// and declare their dead-letter queues as quorum queues too (settle declares a missing one as a
// classic queue, which lives on one node). The package README shows a setup and the cluster
// trial's figures.
//
// # Testing
//
// The transport talks to RabbitMQ only through the Connection and Channel interfaces in this
// package. Dial wraps a real amqp091-go connection in them; the amqptest subpackage implements
// them with an in-process broker on a virtual clock, so the same code runs against both, and
// core/transporttest runs on both.
package amqp
