package sqlqueue

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/advisory"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/lease"
	"github.com/settlehq/settle/core/sqlqueue/internal/rowlock"
)

// queue is an Endpoint: one queue (a table, or a group of a table) in one claim form. Open hands
// the subscription to the form's package (internal/lease, internal/rowlock, internal/advisory),
// which runs it on the form-neutral engine (internal/engine).
type queue struct {
	form    Form
	q       *engine.Queue
	lease   driver.LeaseDialect
	rowLock driver.RowLockDialect
	adv     driver.AdvisoryDialect
}

// NewLease returns the lease-form endpoint of a queue: the table t, and in a table with a
// group column, the group (empty otherwise). Dialect modules call it from their constructors.
func NewLease(d driver.LeaseDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormLease, d, db, t, group)
	if err != nil {
		return nil, err
	}
	if q.q.Schema.LockedUntil == "" {
		return nil, fmt.Errorf("sqlqueue: table %s: the lease form needs a locked_until column (Columns.LockedUntil)", t.Ref())
	}
	q.lease = d
	return q, nil
}

// NewRowLock returns the row-lock-form endpoint of a queue (see NewLease).
func NewRowLock(d driver.RowLockDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormRowLock, d, db, t, group)
	if err != nil {
		return nil, err
	}
	q.rowLock = d
	return q, nil
}

// NewAdvisory returns the advisory-lock-form endpoint of a queue (see NewLease).
func NewAdvisory(d driver.AdvisoryDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormAdvisory, d, db, t, group)
	if err != nil {
		return nil, err
	}
	q.adv = d
	return q, nil
}

func newQueue(f Form, d Dialect, db DB, t Table, group string) (*queue, error) {
	q, err := engine.NewQueue(f.String()+" queue", d, db, t, group)
	if err != nil {
		return nil, err
	}
	return &queue{form: f, q: q}, nil
}

// Queue names the queue: its group, or the table.
func (q *queue) Queue() string { return q.q.Name }

// Open checks the table against the catalogue, renders the statements and starts the form's
// source and finisher. Options the form does not read are refused, naming them.
func (q *queue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	cfg := engine.ConfigOf(sub.Options)
	cfg.SizeClaims(sub.Options.Workers, q.form != FormAdvisory) // the advisory form takes a row per free worker
	switch q.form {
	case FormLease:
		l, err := lease.Open(ctx, q.q, q.lease, sub, cfg)
		if err != nil {
			return nil, nil, err
		}
		return l, l, nil
	case FormRowLock:
		r, err := rowlock.Open(ctx, q.q, q.rowLock, sub, cfg)
		if err != nil {
			return nil, nil, err
		}
		return r, r, nil
	default:
		a, err := advisory.Open(ctx, q.q, q.adv, sub, cfg)
		if err != nil {
			return nil, nil, err
		}
		return a, a, nil
	}
}

// RowID returns the row id of a queue-table delivery (m.Delivery()), and false for a delivery
// of another backend.
func RowID(d core.Delivery) (int64, bool) { return engine.RowID(d) }

// Tx returns the transaction of the delivery the handler is working on, in a subscription
// mounted with Transactional(). Ack commits what the handler wrote through it together with
// the settlement; every other outcome rolls it back. Commit and Rollback are the outcome's:
// calling them returns an error.
func Tx(ctx context.Context) (Transaction, error) { return engine.Tx(ctx) }

// TxAs returns the driver's own transaction (Transaction.Unwrap) of the handler's delivery as a
// T: dialects offer it typed (sqlite.Tx returns *sql.Tx, postgres.Tx a pgx.Tx).
func TxAs[T any](ctx context.Context) (T, error) {
	var zero T
	tx, err := Tx(ctx)
	if err != nil {
		return zero, err
	}
	t, ok := tx.Unwrap().(T)
	if !ok {
		return zero, fmt.Errorf("sqlqueue: the delivery's transaction is a %T, not a %T", tx.Unwrap(), zero)
	}
	return t, nil
}
