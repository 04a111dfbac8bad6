// Package outbox is the transactional outbox: a service records outgoing messages in an outbox
// table inside its own database transaction, and a relay publishes them through a settle
// transport once that transaction has committed, with the record id in the settle-outbox-id
// header.
//
// The relay keeps its own books: a record is marked published (published_at) once the
// transport has confirmed it, and only unpublished records are relayed again (at start, in
// background sweeps, at a bounded rate), so consumers in other services see each record once
// from the relay however often the service restarts; PruneAfter deletes old published
// records. Send refuses a batch whose transaction rolled back.
//
//	box, _ := outbox.New(dialect, db, outbox.StandardTable("outbox"), amqp.OutboxPublisher(broker, "", "payouts-"),
//		outbox.SweepEvery(time.Minute), outbox.PruneAfter(7*24*time.Hour, time.Hour))
//	app.Register(box) // relays what is still unpublished, in the background
//
//	// sender, inside its own transaction:
//	batch, _ := box.RecordJSON(ctx, tx, "payouts", payout, nil)
//	tx.Commit()
//	box.Send(ctx, batch)
//
// Receivers in other services deduplicate by the settle-outbox-id header (or the transport's
// message id) in their own store. A receiver on the outbox's own database may use the
// outbox's receiver-side duplicate suppression instead:
//
//	core.Subscribe(app, payouts, handle, box.Receiver()) // or outbox.Receive without a relay
//
// Guarantee: the relay publishes each committed record at least once (twice only when the
// process dies between a confirmed publish and its mark). When the receiver's handler writes
// through the same database transaction the Receiver's mark runs in (a transactional SQL
// subscription, or Processed inside the handler's own transaction), a record's effects happen
// once: effectively-once. Otherwise processing is at-least-once, and deliveries of an
// already-processed record are acknowledged without running the handler.
package outbox
