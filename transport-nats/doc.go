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
//	drop             +TERM: never delivered again; reported once the server confirmed it
//	                 (UnconfirmedAcks: reported once written)
//	retry            -NAK: delivered again at once
//	retry after d    -NAK with delay d: the server holds the message, durable
//	dead letter      copy with the dead-letter headers published to the destination subject,
//	                 stored (publish acknowledgement), then +TERM of the original (confirmed
//	                 like a drop's)
//	abandoned        -NAK without delay
//
// Acks and +TERMs are confirmed without holding the worker: the frame is published with a reply
// subject of the subscription's own inbox (one NATS subscription per subscription, on the
// connection's inbox prefix), and the answer reports the settlement; Finish returns at once and
// the worker goes on, so a confirmation that is slow or never comes holds no worker and stops no
// fetch. It waits at most RequestTimeout and at most the AckWait (one timer per subscription).
// One that times out, or whose connection drops before the answer, is reported as unknown
// (ErrSettlementUnknown, matching core.ErrSettlementUnknown): the server may have applied it and
// lost the answer — the message is gone — or not, and the message comes back after its AckWait
// (at-least-once). A frame that could not be sent, or that no consumer took ("no responders"), is
// a failed settlement.
//
// # One delivery in hand per message
//
// A subscription keeps the messages it has in hand by stream name and stream sequence, from the
// fetch until their settlement is done (written, or for a confirmed one, answered or failed).
// nats-server writes a consumer's delivery state in the background (sync_interval does not cover
// it), so a server killed with SIGKILL forgets its last ~100 ms of deliveries and, restarted,
// delivers such a message again while a worker still handles it, and ignores an ack of the
// delivery it forgot, without an answer. A delivery of a sequence in hand is therefore not handed
// out: it becomes the delivery the settlement goes to (the server's current one), and the first
// delivery's outcome settles the message once, for both — +ACK or +TERM on the newest delivery
// (one sent earlier and still unanswered is sent again on it; the first answer confirms it), a
// dead letter's copy published once, -NAK (with its delay) on the newest delivery. A delivery of
// a sequence whose ack or +TERM the subscription has just had answered is answered with the same
// frame, not handed out. Both are bounded: entries in hand leave with their settlement, and the
// just-settled ones a table of 1,024 slots by sequence (about the last 1,024). Another process of the same consumer can still
// receive a forgotten delivery and handle it (at-least-once).
//
// m.Attempt() is the server's NumDelivered: every delivery counts, including those whose handler
// never settled (a crash, a hang past AckWait), so core moves a message that keeps coming back
// past its cap to the dead letter without calling the handler. The consumer's MaxDeliver is the
// server's backstop (cap + BackstopMargin by default); when it stops a message the server
// publishes a max-deliveries advisory, which the subscription logs with stream, consumer and
// stream sequence.
//
// # Stranded messages
//
// A message of the queue that the stream still holds at or below the consumer's ack floor is
// never delivered again: a crash of a server that writes JetStream in the background (before
// 2.10; 2.10+ without sync_interval: always, on a power loss) can leave settled messages there,
// and MaxDeliver leaves the ones it stopped. Ops.Stats counts them (ops.Stats.Stranded), a
// subscription's health warns of them (CheckHealth), and Ops.ListStranded and
// Ops.RepairStranded list them and move them, to the dead letter or back to the queue, each
// copy stored before its original goes. At start a subscription logs one line when its stream
// has one replica on a server that does not sync every write (or when it cannot tell).
//
// # Leases and fetching
//
// A subscription sizes its fetches itself: from its worker count (core.Workers), growing while
// fetches come back full and are got through fast, up to DefaultMaxFetch; FetchBatch fixes the
// size; outside a flow of messages (the last fetch came back short) a pull request asks for no
// more than the stream holds for the consumer (the latest delivery says how many), so an idle
// subscription asks for one. It fetches one message at a
// time for one AckWait after it starts when the consumer had unacknowledged messages (a crashed
// predecessor's come due then), and after each suspect delivery (Delivery.Suspect), and hands out
// nothing else while a suspect delivery is being handled: a message that crashes the process
// charges its later crashes to itself alone, not to the messages fetched beside it. Each ack
// waits for the server's confirmation; with UnconfirmedAcks, +ACKs are written in batches (a
// fetch's worth, or 2ms after the first). A fetched message is leased for
// the consumer's AckWait; settle sends +WPI (in progress) for every fetched, unsettled message
// every third of it, on the App's clock, so a long handler keeps its message (and a message
// waiting for a free worker keeps its place). A dead-letter copy that JetStream does not store leaves
// the original unsettled: it is held (still extended) for a backoff on the clock that doubles
// with each failure in a row, then returned with -NAK.
//
// # Publishing
//
// Publish (encoded, default JSON) and PublishRaw return JetStream's publish acknowledgement;
// WithMsgID sets Nats-Msg-Id, and the stream drops a duplicate within its window. A publish
// (or a dead letter's copy) whose acknowledgement is awaited when the connection drops fails at
// once rather than at RequestTimeout: the answer will not come.
// OutboxPublisher relays a core/outbox through a Conn.
//
// # Testing
//
// Package natstest runs real nats-servers with JetStream in the test process (one, or a cluster
// on loopback); the module's tests run every case on it and on the server at
// SETTLE_TEST_NATS_URL.
package natsjs
