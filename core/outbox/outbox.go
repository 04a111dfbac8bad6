package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// HeaderID is the header a relayed message carries its record id in.
const HeaderID = "settle-outbox-id"

// HeaderBatch is the header, stored with a record and never relayed, that names the Record
// call that wrote it: Send finds the batch's own records by it, so a record id reused after a
// rollback (SQLite's AUTOINCREMENT does reuse it) is not taken for the batch's.
const HeaderBatch = "settle-outbox-batch"

// ErrNotCommitted is Send's answer to a batch the table does not hold: its transaction rolled
// back, or has not committed yet. Nothing of the batch is sent.
var ErrNotCommitted = errors.New("outbox: the batch is not committed")

// Message is one outgoing message to record.
type Message struct {
	// Destination is where the relay publishes it (a queue name, a routing key).
	Destination string
	// Payload is the message body.
	Payload []byte
	// Headers are sent along; HeaderID is added by the relay. HeaderID and HeaderBatch are
	// reserved.
	Headers map[string]string
}

// Publisher is what the relay publishes through: a settle transport. Publish returns once the
// transport has confirmed the message (RabbitMQ publisher confirms of a mandatory publish,
// JetStream's publish acknowledgement); the relay then marks the record published. An error
// leaves the record unpublished, to be published again.
//
// transport-amqp's amqp.OutboxPublisher and transport-nats's natsjs.OutboxPublisher are
// publishers for RabbitMQ and NATS JetStream.
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
	return func(o *Outbox) error {
		if l == nil {
			return errors.New("outbox.WithLogger(nil): no logger")
		}
		o.log = l
		return nil
	}
}

// WithClock sets the clock of created_at, published_at and processed_at, of the relay's pace,
// its sweeps and prunes (default: real). Give it the App's clock.
func WithClock(c clock.Clock) Option {
	return func(o *Outbox) error {
		if c == nil {
			return errors.New("outbox.WithClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// SweepEvery also relays, every d, the records not published yet (records whose Send failed,
// or whose process died between the commit and Send). Without it only start-up and Send
// publish.
func SweepEvery(d time.Duration) Option {
	return func(o *Outbox) error {
		if d <= 0 {
			return fmt.Errorf("outbox.SweepEvery(%v): the interval must be positive", d)
		}
		o.sweep = d
		return nil
	}
}

// RelayRate bounds the background relay (at start-up and in sweeps) to perSecond records a
// second, so that a backlog of records does not flood the transport (default 1000). Send is
// not paced.
func RelayRate(perSecond int) Option {
	return func(o *Outbox) error {
		if perSecond <= 0 {
			return fmt.Errorf("outbox.RelayRate(%d): the rate must be positive", perSecond)
		}
		o.rate = perSecond
		return nil
	}
}

// PruneAfter deletes, every `every` on the outbox's clock, the records published more than
// age ago: the table holds what is still to be published plus age of history. A Receiver's
// duplicate suppression covers records still in the table, so keep age longer than any
// redelivery of a published message.
func PruneAfter(age, every time.Duration) Option {
	return func(o *Outbox) error {
		if age <= 0 || every <= 0 {
			return fmt.Errorf("outbox.PruneAfter(%v, %v): the age and the interval must be positive", age, every)
		}
		o.pruneAge, o.pruneEvery = age, every
		return nil
	}
}

// Destinations restricts Record to the named destinations: a record for any other one is
// refused with an error naming it, instead of being published where nothing routes it.
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
// Publisher once the transaction has committed. It keeps its own books: a record is marked
// published (published_at) once the transport confirmed it, and only records not published
// yet are relayed again, so a consumer in another service never sees the history twice.
//
// Register it with the App (it is a core.Backend and core.Starter): at start it checks the
// table and relays what is still unpublished in the background, at a bounded rate
// (RelayRate), without holding the App's readiness; SweepEvery repeats that on a schedule and
// PruneAfter deletes old published records.
//
// A receiver on the outbox's own database can also suppress duplicates and finish records by
// the handler's outcome (Receiver, or Receive in a process without a relay).
type Outbox struct {
	d     sqlqueue.Dialect
	db    sqlqueue.DB
	t     Table
	pub   Publisher
	log   *slog.Logger
	clock clock.Clock
	sweep time.Duration
	rate  int
	dests map[string]bool // nil: any destination
	prop  core.Propagator // WithPropagator; nil: the context's

	pruneAge, pruneEvery time.Duration

	insert, selectPending, readBack, prune string
	lookup, mark                           string
	hasProcessed                           bool

	marks marker // the receiver's marks of dropped and dead-lettered records

	mu       sync.Mutex
	inflight map[int64]bool // being published by Send or the relay
	stop     context.CancelFunc
	done     chan struct{}
	kick     chan struct{}
}

var (
	_ core.Backend = (*Outbox)(nil)
	_ core.Starter = (*Outbox)(nil)
)

// New returns an Outbox on table t of db, spelled by dialect d, that relays through pub. A
// process that only receives uses Receive instead.
func New(d sqlqueue.Dialect, db sqlqueue.DB, t Table, pub Publisher, opts ...Option) (*Outbox, error) {
	if pub == nil {
		return nil, fmt.Errorf("outbox.New(%s): no publisher (a process that only receives uses outbox.Receive)", t.Ref())
	}
	o, err := newOutbox(d, db, t, opts)
	if err != nil {
		return nil, err
	}
	o.pub = pub
	return o, nil
}

func newOutbox(d sqlqueue.Dialect, db sqlqueue.DB, t Table, opts []Option) (*Outbox, error) {
	if d == nil || db == nil {
		return nil, errors.New("outbox: a dialect and a database are required")
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	o := &Outbox{d: d, db: db, t: t.withDefaults(), log: slog.New(slog.DiscardHandler), clock: clock.Real(), rate: 1000,
		inflight: make(map[int64]bool), kick: make(chan struct{}, 1)}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("outbox: nil option")
		}
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
	o.selectPending = "SELECT " + q(c.ID) + ", " + q(c.Destination) + ", " + q(c.Payload) + ", " + headers +
		" FROM " + table + " WHERE " + q(c.PublishedAt) + " IS NULL AND " + q(c.ID) + " > " + o.d.Placeholder(1) +
		" ORDER BY " + q(c.ID) + " LIMIT 500"
	o.readBack = "SELECT " + q(c.Destination) + ", " + q(c.Payload) + ", " + headers + ", " + q(c.PublishedAt) +
		" IS NOT NULL FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
	o.prune = "DELETE FROM " + table + " WHERE " + q(c.PublishedAt) + " IS NOT NULL AND " + q(c.PublishedAt) + " < " + o.d.Placeholder(1)
	o.hasProcessed = c.ProcessedAt != ""
	if o.hasProcessed {
		o.lookup = "SELECT " + q(c.ProcessedAt) + " IS NOT NULL FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
		o.mark = "UPDATE " + table + " SET " + q(c.ProcessedAt) + " = " + o.d.Placeholder(1) +
			" WHERE " + q(c.ID) + " = " + o.d.Placeholder(2) + " AND " + q(c.ProcessedAt) + " IS NULL"
	} else {
		o.lookup = "SELECT 1 = 0 FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
		o.mark = "DELETE FROM " + table + " WHERE " + q(c.ID) + " = " + o.d.Placeholder(1)
	}
}

// markPublished renders the UPDATE that marks n records published.
func (o *Outbox) markPublished(n int) string {
	q, c := o.d.Quote, o.t.Columns
	var b strings.Builder
	b.WriteString("UPDATE " + o.qtable() + " SET " + q(c.PublishedAt) + " = " + o.d.Placeholder(1) + " WHERE " + q(c.ID) + " IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(o.d.Placeholder(i + 2))
	}
	b.WriteString(") AND " + q(c.PublishedAt) + " IS NULL")
	return b.String()
}

func (o *Outbox) qtable() string {
	if o.t.Schema != "" {
		return o.d.Quote(o.t.Schema) + "." + o.d.Quote(o.t.Name)
	}
	return o.d.Quote(o.t.Name)
}

func (o *Outbox) now() time.Time { return o.clock.Now().UTC().Truncate(time.Microsecond) }

// Batch is what one Record call wrote: pass it to Send after the transaction commits.
type Batch struct {
	ids   []int64
	msgs  []Message
	token string // HeaderBatch's value in each record; "" without a headers column
}

// IDs returns the record ids of the batch.
func (b Batch) IDs() []int64 { return append([]int64(nil), b.ids...) }

// Record writes msgs as outbox records inside q, the caller's transaction (wrap a *sql.Tx with
// sqlqueue.StdTx, or use the dialect's adapter). Nothing is sent until Send is called after the
// commit; a rollback records nothing, and Send refuses the batch then.
func (o *Outbox) Record(ctx context.Context, q sqlqueue.Queryer, msgs ...Message) (Batch, error) {
	msgs = o.traced(ctx, msgs)
	b := Batch{msgs: msgs, ids: make([]int64, 0, len(msgs))}
	if o.t.Columns.Headers != "" && len(msgs) > 0 {
		var r [8]byte
		_, _ = rand.Read(r[:])
		b.token = hex.EncodeToString(r[:])
	}
	now := o.d.Time(o.now())
	for i, m := range msgs {
		if strings.TrimSpace(m.Destination) == "" {
			return Batch{}, fmt.Errorf("outbox: record %d of %d has no destination", i+1, len(msgs))
		}
		if o.dests != nil && !o.dests[m.Destination] {
			return Batch{}, fmt.Errorf("outbox: unknown destination %q (not among outbox.Destinations of table %s)", m.Destination, o.t.Ref())
		}
		if err := checkHeaders(m.Headers); err != nil {
			return Batch{}, fmt.Errorf("outbox: record %d of %d for %q: %w", i+1, len(msgs), m.Destination, err)
		}
		args := []any{m.Destination, m.Payload}
		if o.t.Columns.Headers != "" {
			h, err := encodeHeaders(m.Headers, b.token)
			if err != nil {
				return Batch{}, fmt.Errorf("outbox: record %d of %d for %q: headers: %w", i+1, len(msgs), m.Destination, err)
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

// checkHeaders refuses headers the outbox cannot relay as given: its own (HeaderID,
// HeaderBatch), an empty name, and text that is not valid UTF-8 (the JSON column would keep
// U+FFFD in its place).
func checkHeaders(h map[string]string) error {
	for k, v := range h {
		switch {
		case k == HeaderID || k == HeaderBatch:
			return fmt.Errorf("header %s is the outbox's own", k)
		case k == "":
			return errors.New("a header with an empty name")
		case !utf8.ValidString(k):
			return fmt.Errorf("header name %q is not valid UTF-8", k)
		case !utf8.ValidString(v):
			return fmt.Errorf("the value of header %q is not valid UTF-8", k)
		}
	}
	return nil
}

// encodeHeaders is the headers column's value: h as a JSON object, with the batch token.
func encodeHeaders(h map[string]string, token string) (any, error) {
	if len(h) == 0 && token == "" {
		return nil, nil
	}
	if token != "" {
		h = withHeader(h, HeaderBatch, token)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// DecodeHeaders reads a headers column's value: a JSON object of strings (NULL or empty: no
// headers). It is how the relay reads a record's headers back.
func DecodeHeaders(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("outbox: headers are not a JSON object of strings: %w", err)
	}
	return h, nil
}

func withHeader(h map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(h)+1)
	for hk, hv := range h {
		out[hk] = hv
	}
	out[k] = v
	return out
}

// Send publishes a committed batch now, and marks each record published once the transport
// confirmed it. It first reads the batch's records back: a batch whose transaction rolled
// back (or has not committed yet) is refused with ErrNotCommitted and nothing is sent, even
// when another record has taken a rolled-back record's id since. Records already published
// (by a sweep, or an earlier Send) are not sent again. A record whose publish fails stays
// unpublished for the next start or sweep. It returns the first failure.
func (o *Outbox) Send(ctx context.Context, b Batch) error {
	pending := make([]int, 0, len(b.ids))
	for i, id := range b.ids {
		published, err := o.verify(ctx, id, b.msgs[i], b.token)
		if err != nil {
			return err
		}
		if !published {
			pending = append(pending, i)
		}
	}
	var first error
	done := make([]int64, 0, len(pending))
	for _, i := range pending {
		id, m := b.ids[i], b.msgs[i]
		if !o.claim(id) {
			continue // the relay is publishing it right now
		}
		err := o.publish(ctx, id, m.Destination, m.Payload, m.Headers)
		if err == nil {
			done = append(done, id)
		} else if first == nil {
			first = err
		}
	}
	if err := o.markDone(ctx, done); err != nil && first == nil {
		first = err
	}
	return first
}

// verify reads record id back and reports whether it is already published; a record that is
// missing, or that another Record call wrote, is ErrNotCommitted.
func (o *Outbox) verify(ctx context.Context, id int64, m Message, token string) (bool, error) {
	notCommitted := func(why string) error {
		return fmt.Errorf("%w: record %d of table %s %s (the batch's transaction rolled back, or Send ran before the commit); nothing of the batch was sent",
			ErrNotCommitted, id, o.t.Ref(), why)
	}
	rows, err := o.db.Query(ctx, o.readBack, id)
	if err != nil {
		return false, fmt.Errorf("outbox: reading record %d of table %s back: %w", id, o.t.Ref(), err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("outbox: reading record %d of table %s back: %w", id, o.t.Ref(), err)
		}
		return false, notCommitted("does not exist")
	}
	var (
		dest      string
		payload   []byte
		raw       []byte
		published bool
	)
	if err := rows.Scan(&dest, &payload, &raw, &published); err != nil {
		return false, fmt.Errorf("outbox: reading record %d of table %s back: %w", id, o.t.Ref(), err)
	}
	if token != "" {
		h, err := DecodeHeaders(raw)
		if err != nil || h[HeaderBatch] != token {
			return false, notCommitted("was written by another Record call")
		}
	} else if dest != m.Destination || string(payload) != string(m.Payload) {
		// Without a headers column the record's content is what identifies it.
		return false, notCommitted("holds another message")
	}
	return published, rows.Close()
}

// claim marks id in flight; false if it already is.
func (o *Outbox) claim(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inflight[id] {
		return false
	}
	o.inflight[id] = true
	return true
}

// release forgets ids in flight.
func (o *Outbox) release(ids ...int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		delete(o.inflight, id)
	}
}

// publish sends one record (claimed by the caller) with HeaderID and without HeaderBatch. A
// failed publish is released at once; a confirmed one stays claimed until markDone.
func (o *Outbox) publish(ctx context.Context, id int64, dest string, payload []byte, headers map[string]string) error {
	h := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		if k != HeaderBatch {
			h[k] = v
		}
	}
	h[HeaderID] = strconv.FormatInt(id, 10)
	if err := o.pub.Publish(ctx, dest, payload, h); err != nil {
		o.release(id)
		o.log.Warn("outbox: publish failed; the record stays unpublished and is published again",
			"table", o.t.Ref().String(), "record_id", id, "destination", dest, "error", err)
		return fmt.Errorf("outbox: publishing record %d to %q: %w", id, dest, err)
	}
	return nil
}

// markDone marks confirmed records published and releases them. A failed mark leaves them
// unpublished in the table: they are published again (a duplicate the receiver must absorb).
func (o *Outbox) markDone(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	defer o.release(ids...)
	args := make([]any, 0, len(ids)+1)
	args = append(args, o.d.Time(o.now()))
	for _, id := range ids {
		args = append(args, id)
	}
	if _, err := o.db.Exec(ctx, o.markPublished(len(ids)), args...); err != nil {
		o.log.Warn("outbox: published records could not be marked; they will be published again",
			"table", o.t.Ref().String(), "records", len(ids), "first_record_id", ids[0], "error", err)
		return fmt.Errorf("outbox: marking %d published records of table %s (they will be published again): %w", len(ids), o.t.Ref(), err)
	}
	return nil
}
