package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// ErrNoTransaction is returned by Tx outside a handler behind an inbox.
var ErrNoTransaction = errors.New("inbox: no inbox transaction in this context (mount the handler with box.Receive())")

type txKey struct{}

// Tx returns the transaction of the delivery the handler is working on: the one the inbox
// recorded the message id in. What the handler writes through it commits with that record when
// the handler returns nil, and rolls back with it otherwise. Commit and Rollback are the
// inbox's: calling them returns an error.
func Tx(ctx context.Context) (sqlqueue.Transaction, error) {
	h, ok := ctx.Value(txKey{}).(*handlerTx)
	if !ok {
		return nil, ErrNoTransaction
	}
	return h, nil
}

// TxAs returns the driver's own transaction (Transaction.Unwrap) as a T: *sql.Tx for the
// database/sql dialects (SQLite, MySQL), pgx.Tx for PostgreSQL.
func TxAs[T any](ctx context.Context) (T, error) {
	var zero T
	tx, err := Tx(ctx)
	if err != nil {
		return zero, err
	}
	t, ok := tx.Unwrap().(T)
	if !ok {
		return zero, fmt.Errorf("inbox: the delivery's transaction is a %T, not a %T", tx.Unwrap(), zero)
	}
	return t, nil
}

// handlerTx is the handler's view of the inbox's transaction.
type handlerTx struct{ sqlqueue.Transaction }

var errOutcome = errors.New("inbox: the delivery's transaction is committed or rolled back by the handler's outcome, not by the handler")

func (h *handlerTx) Commit(context.Context) error   { return errOutcome }
func (h *handlerTx) Rollback(context.Context) error { return errOutcome }

// Middleware is the inbox as a core.Middleware (Receive mounts it).
func (b *Inbox) Middleware(next core.HandlerFunc) core.HandlerFunc {
	return func(ctx context.Context, d core.Delivery) (err error) {
		key := b.key(d)
		// The handler's outcome ends the transaction, not its context (database/sql rolls a
		// transaction back when the context it began with ends).
		tx, err := b.db.Begin(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("inbox: beginning the transaction of message %s on table %s: %w", d.ID(), b.table, err)
		}
		finished := false
		defer func() {
			if !finished { // the handler panicked: nothing of it is kept
				_ = tx.Rollback(context.WithoutCancel(ctx))
			}
		}()
		if key == "" {
			b.log.Warn("inbox: the delivery has no key; handled without deduplication", "table", b.table.String(),
				"message_id", d.ID(), "attempt", d.Attempt())
		} else {
			r, err := tx.Exec(ctx, b.insert, storedKey(key), b.now(b.clock.Now()))
			if err != nil {
				finished = true
				_ = tx.Rollback(context.WithoutCancel(ctx))
				return fmt.Errorf("inbox: recording message %s in table %s: %w", key, b.table, err)
			}
			if r.RowsAffected == 0 {
				finished = true
				_ = tx.Rollback(context.WithoutCancel(ctx))
				b.duplicate(ctx, key, d)
				return nil
			}
		}
		err = next(context.WithValue(ctx, txKey{}, &handlerTx{tx}), d)
		finished = true
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("inbox: committing message %s and the handler's writes in table %s (the message is not acknowledged): %w", key, b.table, err)
		}
		if key != "" {
			b.recorded.Add(1)
		}
		return nil
	}
}

func (b *Inbox) duplicate(ctx context.Context, key string, d core.Delivery) {
	b.duplicates.Add(1)
	b.log.DebugContext(ctx, "inbox: message already processed; acknowledged without the handler", "table", b.table.String(),
		"message_id", d.ID(), "key", key, "attempt", d.Attempt())
	if b.onDup != nil {
		b.onDup(b.table.String(), d)
	}
}
