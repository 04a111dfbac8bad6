package postgres

import (
	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core/sqlqueue"
)

// NewPublisher returns a publisher that inserts messages into the queue table t on db (and
// group, in a table with a group column). Publishing wakes the queue's subscriptions in this
// process at once and, on a DB with Notify(true), in every other process through pg_notify.
// Its clock is the DB's (WithClock) unless opts set one.
func NewPublisher(db *DB, t sqlqueue.Table, group string, opts ...sqlqueue.PublisherOption) (*sqlqueue.Publisher, error) {
	if err := checkTable(db, t); err != nil {
		return nil, err
	}
	return sqlqueue.NewPublisher(db.dialect, db.adapter, t, group, append([]sqlqueue.PublisherOption{sqlqueue.PublishClock(db.clock)}, opts...)...)
}

// InTx publishes inside the caller's pgx transaction: the message exists exactly when the
// caller's other writes commit, and its notification (Notify(true)) is delivered at that
// commit.
func InTx(tx pgx.Tx) sqlqueue.PublishOption { return sqlqueue.InTx(WrapTx(tx)) }
