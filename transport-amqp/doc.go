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
//     with the count raised by one, then acknowledges the original — publish first, on the same
//     channel, so a crash between the two duplicates and never loses. At the cap the copy goes to
//     dest (default exchange, routing key = dest) carrying the final count. Without a cap a retry
//     is a plain requeue. Copies are published as the publish policy says (see below).
//   - Quorum(b, "payouts", ...) — the server counts (x-delivery-count). core.DeadLetterAfter(n,
//     dest) becomes queue arguments: x-queue-type=quorum, x-delivery-limit=n-1 (RabbitMQ 3.10
//     delivers a message limit+1 times), x-dead-letter-exchange="" and
//     x-dead-letter-routing-key=dest; a retry stays a plain requeue and the server moves the
//     message, whether the service runs or not. That needs DeclareTopology(true): without it the
//     subscription refuses to start, because a queue declared elsewhere carries its owner's
//     arguments. Without a cap the queue is declared with an explicit x-delivery-limit of
//     DefaultDeliveryLimit (RabbitMQ 4's default), settable with DeliveryLimit, which needs a
//     DeadLetterExchange route. Quorum queues publish copies too (dead letters at the cap,
//     waiting-queue copies), under the same publish policy.
//
// # Outcomes
//
//	ack              basic.ack (coalesced, see below)
//	drop             basic.reject requeue=false; the queue's own DLX (DeadLetterExchange) takes it
//	retry            classic with a cap: copy with the count raised, then ack; otherwise
//	                 basic.reject requeue=true
//	retry after d    a copy with the count raised waits d, then the original is acknowledged
//	dead letter      copy to the destination carrying the final count, then ack
//	abandoned        basic.reject requeue=true: never acknowledged, it comes back
//
// A drop on a quorum queue with a cap is acknowledged instead of rejected: that queue's
// dead-letter route is settle's dead letter, which keeps only messages that spent their
// attempts. A delayed copy is a new message with its count raised, so the cap stops a delayed
// loop like an immediate one; on a quorum queue, whose server count starts over for the copy,
// the transport itself moves a copy that reached the cap to the destination.
//
// Delays: without a delay backend a RetryAfter copy waits in the process (core.InProcessDelay):
// at-most-once, logged for every copy, and lost if the service stops during the delay.
//
// # Attempts
//
// m.Attempt() is 1 on the first delivery. On a quorum queue it is settle-retry-count +
// x-delivery-count + 1 (QuorumDelivery.RedeliveryCount reports x-delivery-count). A classic
// queue reports only whether a message was delivered before (Delivery.Redelivered), so its
// attempt is settle-retry-count + 1, plus one for a redelivered message: repeated returns of the
// same message count once. A settle-retry-count that is not a decimal string counts as 0 and is
// logged. Copies keep the body, content type, message and correlation ids and the user's
// headers; they never carry the broker's x-death, x-first-death-* or x-last-death-* headers,
// which describe another message's history (and which RabbitMQ 3.13+ ignores when set by a
// client).
//
// # Topology
//
// With DeclareTopology(true) each subscription declares its exchanges (Bind), queue with its
// arguments (Durable, Exclusive, AutoDelete, Arguments, DeadLetterExchange), bindings, and the
// cap's dead-letter queue, idempotently, at start and after every reconnection. A queue that
// exists with other arguments fails with a *TopologyError (ErrMismatch) showing the arguments
// declared and the server's account of the difference. Off (the default), the subscription
// checks passively that its queue and dead-letter queue exist and refuses to start naming what
// is missing (ErrNotFound). Names and routing keys over 255 bytes are refused.
//
// # Throughput and faults
//
// Prefetch(n) sets basic.qos per subscription; core.Workers(n) runs handlers concurrently.
// Acknowledgements are coalesced: a contiguous run of settled delivery tags goes out as one
// basic.ack with multiple=true when a prefetch's worth (at most 128) has settled or 2ms after the first
// (rejections go out at once, one per message). A settlement reports success once its frame is
// written.
//
// When the channel or connection drops, the consumer reconnects with backoff on the clock
// (ReconnectBackoff), redeclares when declaring, consumes again and logs each step. Deliveries
// carry their channel's epoch: a settlement for a delivery of a closed channel is never sent on
// the new one (RabbitMQ would close it for an unknown delivery tag); it fails with
// ErrChannelGone and the broker returns the message by itself. Nothing acknowledged is lost; a
// message whose acknowledgement was lost with the connection comes back (at-least-once).
//
// # Testing
//
// The transport talks to RabbitMQ only through the Connection and Channel interfaces in this
// package. Dial wraps a real amqp091-go connection in them; the amqptest subpackage implements
// them with an in-process broker on a virtual clock, so the same code runs against both, and
// core/transporttest runs on both.
package amqp
