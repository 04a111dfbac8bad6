// Package settlewatermill runs Watermill on settle's backends: a message.Publisher and a
// message.Subscriber over settle queues, so that Watermill's router, middleware and CQRS
// components get lease-fenced SKIP LOCKED queue tables on PostgreSQL, MySQL/MariaDB and SQLite,
// or RabbitMQ classic and quorum queues, with settle's attempt count, cap and dead letter.
// The module lives in the folder adapter-watermill.
//
// Topics maps Watermill topics onto a backend's queues. SQL builds it on one queue table with a
// group column, each queue a group (from any dialect: sqlite, postgres, mysql, in any claim form
// the dialect offers); AMQP builds it on a transport-amqp Broker, each topic a queue (or an
// exchange with a queue per consumer group). NewPublisher and NewSubscriber take the Topics.
//
// A message keeps its UUID (the AMQP message id; a header on SQL), its metadata (headers) and
// its payload. Each Subscribe runs a settle subscription whose handler hands messages to the
// returned channel: Ack acknowledges, Nack retries (after RedeliveryDelay, when set), and a
// message still in hand when the subscription ends is abandoned and comes back. The attempt
// number is in the metadata (MetadataAttempt). Settle's options apply through Mount:
// core.DeadLetterAfter replaces Watermill's Retry and PoisonQueue middleware with a cap that
// holds even when the process dies mid-message.
//
// Consumer groups need fan-out Topics (FanOut, AMQPFanOut): each group has a queue, and a
// publish stores the message once per group.
package settlewatermill
