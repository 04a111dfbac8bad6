// Package natsjs is settle's NATS JetStream transport (folder transport-nats, package natsjs),
// built on github.com/nats-io/nats.go and its jetstream package.
//
// # Queues
//
// A Conn is one NATS connection, registered with the App. NewQueue(conn, "refunds") is an
// endpoint: the stream that captures the subject (named after it, or Stream(name)) and a durable
// pull consumer on it (Durable(name)), filtered on the subject. With DeclareTopology(true) each
// subscription declares what is missing — the stream (work-queue retention, file storage, one
// replica unless told otherwise), the consumer (explicit acks, AckWait, MaxDeliver) and a stream
// capturing the dead-letter subject of core.DeadLetterAfter — and compares what exists with what
// it would declare; without it, it only checks. Either way a missing stream or consumer
// (ErrNotFound) or one with other settings (ErrMismatch, listing each difference) refuses the
// subscription at start with a *TopologyError.
//
// # Outcomes
//
//	ack              +ACK as a double ack: reported once the server confirmed it
//	                 (UnconfirmedAcks: batched, reported once written)
//	drop             +TERM: never delivered again
//	retry            -NAK: delivered again at once
//	retry after d    -NAK with delay d: the server holds the message, durable
//	dead letter      copy with the dead-letter headers published to the destination subject,
//	                 stored (publish acknowledgement), then +TERM of the original
//	abandoned        -NAK without delay
//
// m.Attempt() is the server's NumDelivered: every delivery counts, including those whose handler
// never settled (a crash, a hang past AckWait), so core moves a message that keeps coming back
// past its cap to the dead letter without calling the handler. The consumer's MaxDeliver is the
// server's backstop (cap + BackstopMargin by default); when it stops a message the server
// publishes a max-deliveries advisory, which the subscription logs with stream, consumer and
// stream sequence.
//
// # Leases and fetching
//
// A subscription fetches batches of its worker count (core.Workers). It fetches one message at a
// time for one AckWait after it starts when the consumer had unacknowledged messages (a crashed
// predecessor's come due then), and after each suspect delivery (Delivery.Suspect), and hands out
// nothing else while a suspect delivery is being handled: a message that crashes the process
// charges its later crashes to itself alone, not to the messages fetched beside it. Each ack
// waits for the server's confirmation; with UnconfirmedAcks, +ACKs are written in batches (the
// worker count's worth, or 2ms after the first). A fetched message is leased for
// the consumer's AckWait; settle sends +WPI (in progress) for every fetched, unsettled message
// every third of it, on the App's clock, so a long handler keeps its message (and a message
// waiting for a free worker keeps its place). A dead-letter copy that JetStream does not store leaves
// the original unsettled: it is held (still extended) for a backoff on the clock that doubles
// with each failure in a row, then returned with -NAK.
//
// # Publishing
//
// Publish (encoded, default JSON) and PublishRaw return JetStream's publish acknowledgement;
// WithMsgID sets Nats-Msg-Id, and the stream drops a duplicate within its window.
// OutboxPublisher relays a core/outbox through a Conn.
//
// # Testing
//
// Package natstest runs real nats-servers with JetStream in the test process (one, or a cluster
// on loopback); the module's tests run every case on it and on the server at
// SETTLE_TEST_NATS_URL.
package natsjs
