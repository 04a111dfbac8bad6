// Package outbox is the transactional outbox: a service records outgoing messages in an outbox
// table inside its own database transaction, and a relay publishes them through a settle
// transport once that transaction has committed, with the record id in the settle-outbox-id
// header. The receiving side finishes records by the handler's outcome: ack and drop mark the
// record processed, retry leaves it, and every unprocessed record is published again at the
// next start.
//
//	box, _ := outbox.New(dialect, db, outbox.StandardTable("outbox"), publisher)
//	app.Register(box) // publishes unprocessed records at start
//
//	// sender, inside its own transaction:
//	batch, _ := box.RecordJSON(ctx, tx, "payouts", payout, nil)
//	tx.Commit()
//	box.Send(ctx, batch)
//
//	// receiver:
//	core.Subscribe(app, payouts, handle, box.Receiver())
//
// Guarantee: when the receiver's handler writes through the same database transaction the
// mark runs in (a transactional SQL subscription, or Processed inside the handler's own
// transaction), a record's effects happen once: effectively-once. Otherwise processing is
// at-least-once, and deliveries of an already-processed record are acknowledged without
// running the handler.
package outbox
