// Package amqptest is an in-process RabbitMQ for tests: a Broker that implements the
// transport's amqp.Connection and amqp.Channel in memory, on an injected clock.
//
// It follows RabbitMQ 3.10 as measured against a real server (the parity tests in this
// package run one table of behaviours on both):
//
//   - exchanges: the default exchange, direct, fanout, topic (* and #), headers, and the
//     x-delayed-message type of the rabbitmq_delayed_message_exchange plugin (x-delayed-type
//     argument, x-delay header in milliseconds, negated on release; each message is held for
//     its own delay, so a short delay never waits behind a long one). Publishing to a missing
//     exchange closes the channel with 404; a message that reaches no queue is dropped.
//   - queues: durable, exclusive and auto-delete flags; redeclaring with other flags or other
//     arguments (among those RabbitMQ compares) closes the channel with 406, or 405 for
//     exclusivity; passive declaration of a missing queue closes it with 404; classic and
//     quorum types.
//   - expiry: x-message-ttl and per-message expiration, checked only at the queue head, then
//     dead-lettering through x-dead-letter-exchange / x-dead-letter-routing-key with the x-death
//     entry and the x-first-death-* headers RabbitMQ 3.10 writes (3.10 writes no
//     x-last-death-* headers), and RabbitMQ's dead-letter cycle detection.
//   - quorum queues: every return of a delivery (reject or nack with requeue, channel close)
//     counts; deliveries carry x-delivery-count from the first redelivery on (basic.get always);
//     with x-delivery-limit = N a message is delivered N+1 times and the return of the last
//     delivery dead-letters it with reason delivery_limit. A returned message goes to the back
//     of a quorum queue and to its original position in a classic queue.
//   - consumers: round-robin, basic.qos per consumer (global=false) or per channel
//     (global=true), delivery tags per channel from 1, ack/nack/reject with multiple (tag 0 =
//     all), unknown delivery tags close the channel with 406, closing a channel returns its
//     unacknowledged deliveries with Redelivered set.
//   - publisher confirms: after Confirm every publishing is confirmed, in order, through
//     NotifyPublish and deferred confirmations: a nack when a queue it reached refused it.
//   - mandatory: a mandatory publishing that reaches no queue is returned (312 NO_ROUTE) to the
//     NotifyReturn listeners before its confirmation; an x-delayed-message exchange returns
//     every mandatory publishing it holds back, as the plugin does (it routes only later).
//   - length limits: x-max-length with x-overflow drop-head (the default: the oldest ready
//     message is dead-lettered with reason maxlen), reject-publish (refused, nacked under
//     confirms; a classic queue is full at x-max-length ready messages, a quorum queue above
//     it) and reject-publish-dlx.
//   - dead-letter strategies: at-most-once (the default) drops a dead letter its target refuses
//     (a full queue) or that reaches no queue; a quorum queue with x-dead-letter-strategy
//     at-least-once and x-overflow reject-publish keeps it — no longer ready, never delivered,
//     counted in QueueInfo.DeadLettering (RabbitMQ's management API counts it in the queue's
//     messages, a passive declaration does not) — and routes it again after every operation on
//     the broker, until every target takes it (RabbitMQ's dead-letter worker tries again on a
//     timer of minutes).
//   - limits and validation: per-message expiration and x-message-ttl up to MaxTTL (larger ones
//     are refused with {value_too_large,N}), x-overflow values, and x-dead-letter-strategy
//     (quorum queues only; at-most-once or at-least-once).
//
// Time comes only from the clock: with a clock.Virtual, Advance releases expired and delayed
// messages (the broker keeps at most one timer armed), and every inspection method (Messages,
// Queue, Held) first applies whatever is due at the clock's current time, so a test can
// Advance and then look without waiting. Not emulated: streams, priorities,
// x-max-length-bytes, transactions, alternate exchanges, exchange-to-exchange bindings, and
// a crash in the middle of a dead-letter move (the fake never crashes mid-move).
package amqptest
