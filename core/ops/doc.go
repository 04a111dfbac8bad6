// Package ops is the operations API every settle backend implements: a queue's depth by state
// (ready, delayed, in flight, dead) and the age of its oldest ready message, and its dead
// letters — list them with why they died, show one, redrive them to the queue they came from,
// or purge them.
//
// A Queue is one queue and its dead letter on one backend:
//
//	sqlqueue.NewOps(ctx, dialect, db, table, "refunds", "refunds.dead") // SQL, any dialect and table shape
//	amqp.NewOps(ctx, conn, "refunds", "refunds.dead")             // RabbitMQ
//	natsjs.NewOps(ctx, conn, "refunds", "refunds.dead")           // NATS JetStream
//	coretest.NewBroker(clock, nil).Ops("refunds", "refunds.dead") // the in-memory test broker
//
// The settle command (module cmd/settle: settle stats, settle dead ls|show|redrive|purge) and
// its web console (settle console) use nothing else.
//
// # Why a message died
//
// A dead letter carries what core.DeadLetterInfo records when settle moves a message: its
// final count, origin queue, time and last failure (the settle-* headers; on SQL tables also
// the optional last_error column). DeadLetter has them as fields; dead letters moved by
// something else show what their backend knows.
//
// # Changing things
//
// Redrive and Purge take a Selection that names dead letters explicitly — IDs(…), Matching(a
// non-empty Filter) or All() — and refuse the zero one with ErrNoSelection, so that a missing
// argument never means "everything". A selection of ids is all or nothing: an unknown id gives
// a *NotFoundError and changes nothing. Redrive starts each message's attempt count again
// unless RedriveOptions.KeepAttempts.
//
// Backends whose figures cannot be taken without the server's internals report them in
// Stats.Unmeasured with why (a row-lock claim's locks, RabbitMQ's unacknowledged messages),
// rather than a zero that reads as "none". Stats.Stranded counts messages a backend holds that
// its consumer will never deliver again (a JetStream stream's below its consumer's ack floor,
// after a server crash); only JetStream can strand messages, and natsjs.Ops repairs them.
//
// The conformance suite is package opstest.
package ops
