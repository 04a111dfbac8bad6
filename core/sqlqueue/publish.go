package sqlqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// Publisher inserts messages into one queue: a table, or a group of a table with a group
// column. It is safe for concurrent use. The INSERT is rendered once, at construction.
type Publisher struct {
	d      Dialect
	db     DB
	s      *driver.Schema
	group  string
	codec  core.Codec
	clock  clock.Clock
	notify driver.Notifier
	ref    driver.QueueRef
	prop   core.Propagator // PublishPropagator; nil: the one the context carries
	sql    [4]string       // by (delay, headers)
}

// PublisherOption configures a Publisher.
type PublisherOption func(*Publisher) error

// PublishCodec encodes payloads with c (default core.JSON).
func PublishCodec(c core.Codec) PublisherOption {
	return func(p *Publisher) error {
		if c == nil {
			return errors.New("sqlqueue.PublishCodec(nil): no codec")
		}
		p.codec = c
		return nil
	}
}

// PublishClock takes created_at and delays from c (default: the wall clock); give it the
// App's clock.
func PublishClock(c clock.Clock) PublisherOption {
	return func(p *Publisher) error {
		if c == nil {
			return errors.New("sqlqueue.PublishClock(nil): no clock")
		}
		p.clock = c
		return nil
	}
}

// NewPublisher returns a Publisher for the queue table t (and group, in a table with a group
// column). Dialect modules wrap it.
func NewPublisher(d Dialect, db DB, t Table, group string, opts ...PublisherOption) (*Publisher, error) {
	q, err := engine.NewQueue("publisher", d, db, t, group)
	if err != nil {
		return nil, err
	}
	p := &Publisher{d: d, db: db, s: q.Schema, group: group, codec: core.JSON, clock: clock.Real(), ref: q.Ref()}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("sqlqueue.NewPublisher: nil option")
		}
		if err := o(p); err != nil {
			return nil, err
		}
	}
	p.notify, _ = d.(driver.Notifier)
	p.sql = engine.Inserts(q)
	return p, nil
}

// PublishOption sets something about one published message.
type PublishOption func(*publishOpts)

type publishOpts struct {
	delay   time.Duration
	headers map[string]string
	tx      Queryer
}

// Delay holds the message back for d (its retry_after); the delay stays in the database and
// survives restarts.
func Delay(d time.Duration) PublishOption { return func(o *publishOpts) { o.delay = d } }

// WithHeaders stores h in the headers column.
func WithHeaders(h map[string]string) PublishOption { return func(o *publishOpts) { o.headers = h } }

// InTx inserts inside the caller's transaction, so the message exists exactly when the
// caller's other writes commit. Dialects offer typed forms (sqlite.InTx(*sql.Tx)). The
// process's claimants are woken at the insert, before the caller commits; a claimant that
// looks too early finds the row at its next poll.
func InTx(tx Queryer) PublishOption { return func(o *publishOpts) { o.tx = tx } }

// Publish encodes v with the publisher's codec and inserts it; it returns the new row's id.
func Publish[T any](ctx context.Context, p *Publisher, v T, opts ...PublishOption) (int64, error) {
	body, err := p.codec.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("sqlqueue: encoding a message for queue %q: %w", p.Queue(), err)
	}
	return p.PublishRaw(ctx, body, opts...)
}

// Queue names the publisher's queue: its group, or its table.
func (p *Publisher) Queue() string {
	if p.group != "" {
		return p.group
	}
	return p.s.Table.Ref().String()
}

// PublishRaw inserts payload as it is and returns the new row's id.
func (p *Publisher) PublishRaw(ctx context.Context, payload []byte, opts ...PublishOption) (int64, error) {
	var o publishOpts
	for _, f := range opts {
		f(&o)
	}
	s := p.s
	if o.delay > 0 && s.RetryAfter == "" {
		return 0, fmt.Errorf("sqlqueue: publishing with a delay to table %s, which has no retry_after column", s.Table.Ref())
	}
	if o.delay < 0 {
		return 0, fmt.Errorf("sqlqueue: publishing to queue %q with a negative delay %v", p.Queue(), o.delay)
	}
	if s.Headers != "" {
		o.headers = core.InjectHeaders(ctx, p.prop, o.headers) // the caller's trace context
	}
	now := p.clock.Now().UTC().Truncate(time.Microsecond)
	args := []any{payload}
	if s.Group != "" {
		args = append(args, p.group)
	}
	if s.Attempt != "" {
		args = append(args, int64(0))
	}
	if s.CreatedAt != "" {
		args = append(args, p.d.Time(now))
	}
	i := 0
	if o.delay > 0 {
		i |= 1
		args = append(args, p.d.Time(now.Add(o.delay)))
	}
	if o.headers != nil && s.Headers != "" {
		i |= 2
		h, err := json.Marshal(o.headers)
		if err != nil {
			return 0, err
		}
		args = append(args, string(h))
	}
	q := o.tx
	if q == nil {
		q = p.db
	}
	id, err := p.insert(ctx, q, p.sql[i], args)
	if err != nil {
		return 0, fmt.Errorf("sqlqueue: publishing to queue %q: %w", p.Queue(), err)
	}
	if p.notify != nil {
		if err := p.notify.Notify(ctx, q, p.ref); err != nil {
			return id, fmt.Errorf("sqlqueue: notifying queue %q: %w", p.Queue(), err)
		}
	}
	engine.NotifyQueue(p.db, p.ref) // this process's claimants, if it has any
	return id, nil
}

func (p *Publisher) insert(ctx context.Context, q Queryer, sql string, args []any) (int64, error) {
	return InsertID(ctx, p.d, q, sql, args...)
}

// InsertID runs an INSERT of one row and returns the id it generated: from the statement's
// RETURNING clause where the dialect has one (the caller appends it), from
// Result.LastInsertID otherwise. The outbox records its rows with it.
func InsertID(ctx context.Context, d Dialect, q Queryer, sql string, args ...any) (int64, error) {
	if !d.Returning() {
		r, err := q.Exec(ctx, sql, args...)
		return r.LastInsertID, err
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var id int64
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, errors.New("the insert returned no id")
	}
	if err := rows.Scan(&id); err != nil {
		return 0, err
	}
	return id, rows.Close()
}
