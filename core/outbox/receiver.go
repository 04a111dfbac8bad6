package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Receiver marks a subscription as a receiving side of this outbox, on the outbox's own
// database: a receiver-side duplicate suppression, for services whose handlers write to that
// database. For a delivery that carries HeaderID it looks the record up first: a record
// already processed is acknowledged without running the handler. Ack, drop and a move to the
// dead letter mark the record processed (processed_at, or delete it without that column);
// retry and retry-after leave it unprocessed, and the transport delivers the message again.
// (The relay's own books, published_at, are apart: a receiver in another service needs none
// of this, and the relay never republishes what the transport confirmed.)
//
// An ack's mark runs in the delivery's transaction when the subscription is a transactional
// SQL one (sqlqueue.Transactional) on the outbox's database, so it commits with the handler's
// writes; a handler on another transport can mark inside its own transaction with Processed.
// Otherwise the receiver marks on the outbox's database after the handler returned, before the
// ack. A drop or dead letter rolls a transactional handler's writes back, so its mark is made
// on the outbox's database once that settlement is durable.
//
// A delivery without the header, or with a malformed one, or for a record no longer in the
// table (pruned), is handled as a plain delivery and logged.
func (o *Outbox) Receiver() core.Option {
	return core.OptionFunc(func(opts *core.Options) error {
		return opts.Apply(core.Use(o.receive), core.OnSettled(o.settled))
	})
}

// Receive is Receiver for a process that receives from an outbox table without relaying it (a
// worker sharing the database with the service that records): it needs no Publisher and
// nothing to register. Of the options, WithLogger and WithClock apply.
//
//	recv, err := outbox.Receive(db.Dialect(), db.Queue(), outbox.StandardTable("outbox"))
//	…
//	err = core.Subscribe(app, payouts, handle, recv)
func Receive(d sqlqueue.Dialect, db sqlqueue.DB, t Table, opts ...Option) (core.Option, error) {
	o, err := newOutbox(d, db, t, opts)
	if err != nil {
		return nil, err
	}
	return o.Receiver(), nil
}

// settled marks the record of a dropped or dead-lettered delivery once that settlement is
// durable: those outcomes roll a transactional handler's writes back, the mark with them, so it
// is made afterwards, on the outbox's database. It runs on the settlement path (an observer), so
// it only hands the record to the marker, which writes on a goroutine of its own.
func (o *Outbox) settled(s core.Settlement) {
	if s.Err != nil || (s.Verdict.Action != core.ActDrop && s.Verdict.Action != core.ActDeadLetter) {
		return
	}
	raw, ok := s.Delivery.Headers()[HeaderID]
	if !ok {
		return
	}
	id, ok := parseRecordID(raw)
	if !ok {
		return
	}
	o.marks.add(o, pendingMark{id: id, queue: s.Queue, action: s.Verdict.Action, message: s.Delivery.ID(), attempt: s.Delivery.Attempt()})
}

// markTimeout bounds one mark of a dropped or dead-lettered record.
const markTimeout = 30 * time.Second

// maxPendingMarks bounds the marks waiting for the database: past it (the database has been
// away for long), a record is left unprocessed, and the next start publishes it again, as after
// a mark that failed.
const maxPendingMarks = 10000

// pendingMark is the mark of one dropped or dead-lettered record, and what to log if it fails.
type pendingMark struct {
	id      int64
	queue   string
	action  core.Action
	message string
	attempt int
}

// marker writes the marks of dropped and dead-lettered records, on a goroutine that runs while
// marks are pending and ends when none is: the settlement observer never waits for the
// database (a mark waits up to markTimeout for it).
type marker struct {
	mu      sync.Mutex
	pending []pendingMark
	running bool
	full    bool          // marks were left out since the marker was last below its bound
	idle    chan struct{} // closed when the running marker ends
}

// add queues m, and starts the marker if it is not running.
func (k *marker) add(o *Outbox, m pendingMark) {
	k.mu.Lock()
	if len(k.pending) >= maxPendingMarks {
		warn := !k.full
		k.full = true
		k.mu.Unlock()
		if warn {
			o.log.Warn("outbox receiver: too many records wait to be marked processed; the next start publishes those left out again",
				"queue", m.queue, "message_id", m.message, "attempt", m.attempt, "record_id", m.id, "pending", maxPendingMarks)
		}
		return
	}
	k.full = false
	k.pending = append(k.pending, m)
	start := !k.running
	if start {
		k.running = true
		k.idle = make(chan struct{})
	}
	k.mu.Unlock()
	if start {
		go k.run(o)
	}
}

// run marks what is pending, one record at a time, until nothing is.
func (k *marker) run(o *Outbox) {
	for {
		k.mu.Lock()
		if len(k.pending) == 0 {
			k.running = false
			close(k.idle)
			k.mu.Unlock()
			return
		}
		m := k.pending[0]
		k.pending = k.pending[1:]
		k.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
		if err := o.markProcessed(ctx, o.db, m.id); err != nil {
			o.log.Warn("outbox receiver: marking a "+m.action.String()+" record processed failed; the next start publishes it again",
				"queue", m.queue, "message_id", m.message, "attempt", m.attempt, "record_id", m.id, "error", err)
		}
		cancel()
	}
}

// wait waits until no mark is pending, or ctx ends.
func (k *marker) wait(ctx context.Context) error {
	k.mu.Lock()
	if !k.running {
		k.mu.Unlock()
		return nil
	}
	idle := k.idle
	k.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitMarked waits until the records of the drops and dead letters settled so far are marked
// processed (or their marks failed and were logged), or ctx ends. The receiver marks them on a
// goroutine of its own, so that no settlement waits for the outbox's database; Close waits for
// them too.
func (o *Outbox) WaitMarked(ctx context.Context) error { return o.marks.wait(ctx) }

type receiptKey struct{}

// receipt is what the receiver tells the handler through its context.
type receipt struct {
	o      *Outbox
	id     int64
	marked bool
}

// Processed marks the record of the delivery the handler is working on as processed inside
// q, the handler's own transaction, so that the mark commits (or rolls back) with its writes.
// It is a no-op outside an outbox receiver or for a delivery that is not an outbox record.
func Processed(ctx context.Context, q sqlqueue.Queryer) error {
	r, ok := ctx.Value(receiptKey{}).(*receipt)
	if !ok || r.marked {
		return nil
	}
	if err := r.o.markProcessed(ctx, q, r.id); err != nil {
		return err
	}
	r.marked = true
	return nil
}

func (o *Outbox) receive(next core.HandlerFunc) core.HandlerFunc {
	return func(ctx context.Context, d core.Delivery) error {
		raw, ok := d.Headers()[HeaderID]
		if !ok {
			o.log.Warn("outbox receiver: delivery has no "+HeaderID+" header; handled as a plain delivery",
				"message_id", d.ID(), "attempt", d.Attempt())
			return next(ctx, d)
		}
		id, ok := parseRecordID(raw)
		if !ok {
			o.log.Warn("outbox receiver: malformed "+HeaderID+" header; handled as a plain delivery",
				"message_id", d.ID(), "attempt", d.Attempt(), "header", raw)
			return next(ctx, d)
		}
		q, err := o.queryer(ctx)
		if err != nil {
			return err
		}
		state, err := o.state(ctx, q, id)
		if err != nil {
			return fmt.Errorf("outbox: looking up record %d in %s: %w", id, o.t.Ref(), err)
		}
		switch state {
		case recordProcessed:
			o.log.Info("outbox receiver: record already processed; duplicate acknowledged without the handler",
				"message_id", d.ID(), "attempt", d.Attempt(), "record_id", id)
			return nil
		case recordMissing:
			o.log.Warn("outbox receiver: no such outbox record; handled as a plain delivery",
				"message_id", d.ID(), "attempt", d.Attempt(), "record_id", id, "table", o.t.Ref().String())
			return next(ctx, d)
		}
		r := &receipt{o: o, id: id}
		err = next(context.WithValue(ctx, receiptKey{}, r), d)
		if err != nil {
			// Retry, retry-after or a failure leave the record unprocessed; a drop (or a move to
			// the dead letter) is marked by settled once it is durable.
			return err
		}
		if !r.marked {
			if merr := o.markProcessed(ctx, q, id); merr != nil {
				return fmt.Errorf("outbox: marking record %d of %s processed (the record stays unprocessed): %w", id, o.t.Ref(), merr)
			}
		}
		return err
	}
}

// queryer is the delivery's transaction in a transactional SQL subscription, else the pool.
func (o *Outbox) queryer(ctx context.Context) (sqlqueue.Queryer, error) {
	tx, err := sqlqueue.Tx(ctx)
	switch {
	case err == nil:
		return tx, nil
	case errors.Is(err, sqlqueue.ErrNotTransactional):
		return o.db, nil
	}
	return nil, err
}

type recordState uint8

const (
	recordUnprocessed recordState = iota
	recordProcessed
	recordMissing
)

func (o *Outbox) state(ctx context.Context, q sqlqueue.Queryer, id int64) (recordState, error) {
	rows, err := q.Query(ctx, o.lookup, id)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if !o.hasProcessed {
			return recordProcessed, nil // processed records are deleted
		}
		return recordMissing, nil
	}
	var processed bool
	if err := rows.Scan(&processed); err != nil {
		return 0, err
	}
	if processed {
		return recordProcessed, nil
	}
	return recordUnprocessed, rows.Close()
}

func (o *Outbox) markProcessed(ctx context.Context, q sqlqueue.Queryer, id int64) error {
	var err error
	if o.hasProcessed {
		_, err = q.Exec(ctx, o.mark, o.d.Time(o.now()), id)
	} else {
		_, err = q.Exec(ctx, o.mark, id)
	}
	return err
}

// parseRecordID reads a settle-outbox-id header: a positive id spelled as the relay spells it
// (decimal digits, no sign, no leading zero).
func parseRecordID(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}
