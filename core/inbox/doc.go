// Package inbox makes a broker consumer's database writes happen once per message: an
// idempotent consumer for handlers on RabbitMQ, NATS JetStream or any other settle transport
// that write to the service's own SQL database (PostgreSQL, MySQL, MariaDB, SQLite, through the
// dialects' sqlqueue.DB).
//
// For each delivery the inbox begins a transaction on that database and records the message
// id in the inbox table within it; the handler writes through the same transaction:
//
//	box, _ := inbox.New(db.Dialect(), db.Queue(), "inbox", inbox.WithClock(app.Clock()))
//	app.Register(box) // checks the table, prunes old ids
//	core.Subscribe(app, payments, func(ctx context.Context, m *core.Message[Payment]) error {
//		tx, err := inbox.Tx(ctx)
//		if err != nil {
//			return err
//		}
//		_, err = tx.Exec(ctx, "INSERT INTO ledger (payment, amount) VALUES ($1, $2)", m.Payload.ID, m.Payload.Amount)
//		return err
//	}, box.Receive())
//
// The inbox commits when the handler returns nil, before the message is acknowledged; every
// other outcome rolls back the handler's writes and the record together. A process that dies
// between the commit and the acknowledgement gets the message again, finds its id recorded and
// acknowledges it without running the handler (logged at debug, counted in Stats and
// OnDuplicate). A commit that fails is the handler's error: the message is retried.
//
// The guarantee rests on message ids that stay the same on every redelivery, retry copy and
// dead letter of one message: settle's transports keep them so (docs/inbox.md says where each
// comes from), and KeyFrom picks a key of the sender's own where they do not.
//
// Ids are remembered for a retention (Retain, seven days by default): a duplicate arriving
// later runs the handler again.
//
// Combined with core/outbox — the handler records its outgoing messages in the same
// transaction — a message's effects, from the broker to the database to the messages it sends
// on, happen once.
package inbox
