package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// HeaderID is the header a relayed message carries its record id in.
const HeaderID = "settle-outbox-id"

// Message is one outgoing message to record.
type Message struct {
	// Destination is where the relay publishes it (a queue name, a routing key).
	Destination string
	// Payload is the message body.
	Payload []byte
	// Headers are sent along; HeaderID is added by the relay.
	Headers map[string]string
}

// Publisher is what the relay publishes through: a settle transport. Publish returns once the
// transport has confirmed the message (RabbitMQ publisher confirms); an error leaves the record
// unprocessed, to be published again.
type Publisher interface {
	Publish(ctx context.Context, dest string, payload []byte, headers map[string]string) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, dest string, payload []byte, headers map[string]string) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, dest string, payload []byte, headers map[string]string) error {
	return f(ctx, dest, payload, headers)
}

// Option configures an Outbox.
type Option func(*Outbox) error

// WithLogger sets the outbox's logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *Outbox) error { o.log = l; return nil }
}

// WithClock sets the clock of created_at, processed_at and the sweep (default: real).
func WithClock(c clock.Clock) Option {
	return func(o *Outbox) error { o.clock = c; return nil }
}

// SweepEvery also publishes, every d, the unprocessed records this process has not published
// yet (records whose Send failed, or whose transaction committed after a sweep passed them).
// Without it only start-up and Send publish.
func SweepEvery(d time.Duration) Option {
	return func(o *Outbox) error {
		if d <= 0 {
			return fmt.Errorf("outbox.SweepEvery(%v): the interval must be positive", d)
		}
		o.sweep = d
		return nil
	}
}

// Destinations restricts Record to the named destinations: a record for any other one is
// refused with an error naming it, instead of being published where nothing routes it (a
// RabbitMQ publish to an unknown routing key is dropped by the broker without a word).
func Destinations(names ...string) Option {
	return func(o *Outbox) error {
		if len(names) == 0 {
			return errors.New("outbox.Destinations(): name at least one destination")
		}
		o.dests = make(map[string]bool, len(names))
		for _, n := range names {
			if strings.TrimSpace(n) == "" {
				return errors.New("outbox.Destinations: an empty destination name")
			}
			o.dests[n] = true
		}
		return nil
	}
}

// Outbox records outgoing messages inside the caller's transaction and relays them through a
// Publisher once the transaction has committed. Register it with the App (it is a core.Backend
// and core.Starter): at start it publishes every unprocessed record again, and a failure there
// aborts start-up.
//
// The receiving side finishes records by the handler's outcome (Receiver): ack and drop mark the
// record processed, retry and retry-after leave it, so the next start publishes it again. The
// guarantee: when the receiver's handler runs in a transactional SQL subscription on the same
// database as the outbox, the mark commits with the handler's writes, so a record's effects
// happen once (effectively-once). Otherwise processing is at-least-once, with duplicates of an
// already-processed record suppressed.
type Outbox struct {
	d     sqlqueue.Dialect
	db    sqlqueue.DB
	t     Table
	pub   Publisher
	log   *slog.Logger
	clock clock.Clock
	sweep time.Duration
	dests map[string]bool // nil: any destination

	insert, selectUnprocessed, lookup, mark string
	hasProcessed                            bool

	mu        sync.Mutex
	published map[int64]bool // published by this process since start, not yet seen processed
	stop      context.CancelFunc
	done      chan struct{}
	kick      chan struct{}
}

var (
	_ core.Backend = (*Outbox)(nil)
	_ core.Starter = (*Outbox)(nil)
)

// New returns an Outbox on table t of db, spelled by dialect d, that relays through pub.
func New(d sqlqueue.Dialect, db sqlqueue.DB, t Table, pub Publisher, opts ...Option) (*Outbox, error) {
	if d == nil || db == nil {
		return nil, errors.New("outbox.New: a dialect and a database are required")
	}
	if pub == nil {
		return nil, fmt.Errorf("outbox.New(%s): no publisher", t.Ref())
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	o := &Outbox{d: d, db: db, t: t.withDefaults(), pub: pub, log: slog.New(slog.DiscardHandler), clock: clock.Real(),
		published: make(map[int64]bool), kick: make(chan struct{}, 1)}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	o.render()
	return o, nil
}

func (o *Outbox) render() {
	q, c := o.d.Quote, o.t.Columns
	table := q(o.t.Name)
	if o.t.Schema != "" {
		table = q(o.t.Schema) + "." + table
	}
	cols := []string{q(c.Destination), q(c.Payload)}
	if c.Headers != "" {
		cols = append(cols, q(c.Headers))
	}
	if c.CreatedAt != "" {
		cols = append(cols, q(c.CreatedAt))
	}
	ph := make([]string, len(cols))
	for i := range ph {
		ph[i] = o.d.Placeholder(i + 1)
	}
	o.insert = "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
	if o.d.Returning() {
		o.insert += " RETURNING " + q(c.ID)
	}
	headers := "NULL"
	if c.Headers != "" {
		headers = q(c.Headers)
	}
	unprocessed := ""
	o.hasProcessed = c.ProcessedAt != ""
	if o.hasProcessed {
		unprocessed = q(c.ProcessedAt) + " IS NULL AND "
	}
	o.selectUnprocessed = "SELECT " + q(c.ID) + ", " + q(c.Destination) + ", " + q(c.Payload) + ", " + headers +
		" FROM " + table + " WHERE " + unprocessed + q(c.ID) + " > " + o.d.Placeholder(1) +
		" ORDER BY " + q(c.ID) + " LIMIT 500"
	if o.hasProcessed {
		o.lookup = "SELECT " + q(c.ProcessedAt) + " IS NOT NULL FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
		o.mark = "UPDATE " + table + " SET " + q(c.ProcessedAt) + " = " + o.d.Placeholder(1) +
			" WHERE " + q(c.ID) + " = " + o.d.Placeholder(2) + " AND " + q(c.ProcessedAt) + " IS NULL"
	} else {
		o.lookup = "SELECT 1 = 0 FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
		o.mark = "DELETE FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
	}
}

func (o *Outbox) now() time.Time { return o.clock.Now().UTC().Truncate(time.Microsecond) }

// Batch is what one Record call wrote: pass it to Send after the transaction commits.
type Batch struct {
	ids  []int64
	msgs []Message
}

// IDs returns the record ids of the batch.
func (b Batch) IDs() []int64 { return append([]int64(nil), b.ids...) }

// Record writes msgs as outbox records inside q, the caller's transaction (wrap a *sql.Tx with
// sqlqueue.StdTx, or use the dialect's adapter). Nothing is sent until Send is called after the
// commit; a rollback records nothing.
func (o *Outbox) Record(ctx context.Context, q sqlqueue.Queryer, msgs ...Message) (Batch, error) {
	b := Batch{msgs: msgs, ids: make([]int64, 0, len(msgs))}
	now := o.d.Time(o.now())
	for i, m := range msgs {
		if strings.TrimSpace(m.Destination) == "" {
			return Batch{}, fmt.Errorf("outbox: record %d of %d has no destination", i+1, len(msgs))
		}
		if o.dests != nil && !o.dests[m.Destination] {
			return Batch{}, fmt.Errorf("outbox: unknown destination %q (not among outbox.Destinations of table %s)", m.Destination, o.t.Ref())
		}
		args := []any{m.Destination, m.Payload}
		if o.t.Columns.Headers != "" {
			h, err := encodeHeaders(m.Headers)
			if err != nil {
				return Batch{}, err
			}
			args = append(args, h)
		}
		if o.t.Columns.CreatedAt != "" {
			args = append(args, now)
		}
		id, err := sqlqueue.InsertID(ctx, o.d, q, o.insert, args...)
		if err != nil {
			return Batch{}, fmt.Errorf("outbox: recording a message for %q in table %s: %w", m.Destination, o.t.Ref(), err)
		}
		b.ids = append(b.ids, id)
	}
	return b, nil
}

// RecordJSON records one JSON-encoded value for dest inside q.
func (o *Outbox) RecordJSON(ctx context.Context, q sqlqueue.Queryer, dest string, v any, headers map[string]string) (Batch, error) {
	body, err := core.JSON.Marshal(v)
	if err != nil {
		return Batch{}, fmt.Errorf("outbox: encoding a message for %q: %w", dest, err)
	}
	return o.Record(ctx, q, Message{Destination: dest, Payload: body, Headers: headers})
}

func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// Send publishes a committed batch now. A record whose publish fails stays unprocessed: the
// next start (or sweep) publishes it. It returns the first failure.
func (o *Outbox) Send(ctx context.Context, b Batch) error {
	var first error
	for i, id := range b.ids {
		m := b.msgs[i]
		if err := o.publish(ctx, id, m.Destination, m.Payload, m.Headers); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (o *Outbox) publish(ctx context.Context, id int64, dest string, payload []byte, headers map[string]string) error {
	h := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		h[k] = v
	}
	h[HeaderID] = strconv.FormatInt(id, 10)
	if err := o.pub.Publish(ctx, dest, payload, h); err != nil {
		o.log.Warn("outbox: publish failed; the record stays unprocessed and is published again",
			"table", o.t.Ref().String(), "record_id", id, "destination", dest, "error", err)
		return fmt.Errorf("outbox: publishing record %d to %q: %w", id, dest, err)
	}
	o.mu.Lock()
	o.published[id] = true
	o.mu.Unlock()
	return nil
}

// PublishUnprocessed publishes every unprocessed record this process has not published since
// start (all of them, at start) and returns how many it published.
func (o *Outbox) PublishUnprocessed(ctx context.Context) (int, error) {
	n := int64(0)
	count := 0
	seen := make(map[int64]bool)
	for {
		type rec struct {
			id      int64
			dest    string
			payload []byte
			headers map[string]string
		}
		rows, err := o.db.Query(ctx, o.selectUnprocessed, n)
		if err != nil {
			return count, fmt.Errorf("outbox: reading unprocessed records of %s: %w", o.t.Ref(), err)
		}
		var page []rec
		for rows.Next() {
			var r rec
			var h []byte
			if err := rows.Scan(&r.id, &r.dest, &r.payload, &h); err != nil {
				rows.Close()
				return count, fmt.Errorf("outbox: reading unprocessed records of %s: %w", o.t.Ref(), err)
			}
			if len(h) > 0 {
				if err := json.Unmarshal(h, &r.headers); err != nil {
					o.log.Warn("outbox: record headers are not a JSON object of strings; publishing without them",
						"table", o.t.Ref().String(), "record_id", r.id, "error", err)
				}
			}
			page = append(page, r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return count, fmt.Errorf("outbox: reading unprocessed records of %s: %w", o.t.Ref(), err)
		}
		if len(page) == 0 {
			// A record published earlier and no longer unprocessed has been finished: forget it.
			o.mu.Lock()
			for id := range o.published {
				if !seen[id] {
					delete(o.published, id)
				}
			}
			o.mu.Unlock()
			return count, nil
		}
		for _, r := range page {
			n = r.id
			seen[r.id] = true
			o.mu.Lock()
			done := o.published[r.id]
			o.mu.Unlock()
			if done {
				continue
			}
			if err := o.publish(ctx, r.id, r.dest, r.payload, r.headers); err != nil {
				return count, err
			}
			count++
		}
	}
}

// Start checks the table and publishes every unprocessed record again; a failure aborts
// start-up. With SweepEvery it then sweeps in the background until Close.
func (o *Outbox) Start(ctx context.Context) error {
	if err := o.t.check(ctx, o.d, o.db); err != nil {
		return err
	}
	n, err := o.PublishUnprocessed(ctx)
	if err != nil {
		return err
	}
	o.log.Info("outbox: published unprocessed records at start", "table", o.t.Ref().String(), "published", n)
	if o.sweep > 0 {
		sctx, stop := context.WithCancel(context.Background())
		o.stop, o.done = stop, make(chan struct{})
		go o.sweepLoop(sctx)
	}
	return nil
}

// Kick makes the sweep run now instead of at its next tick (no-op without SweepEvery).
func (o *Outbox) Kick() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

func (o *Outbox) sweepLoop(ctx context.Context) {
	defer close(o.done)
	t := o.clock.NewTimer(o.sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Reset(o.sweep)
		case <-o.kick:
		}
		if _, err := o.PublishUnprocessed(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("outbox: sweep failed; trying again at the next one", "table", o.t.Ref().String(), "error", err)
		}
	}
}

// Close stops the sweep.
func (o *Outbox) Close() error {
	if o.stop != nil {
		o.stop()
		<-o.done
		o.stop = nil
	}
	return nil
}
