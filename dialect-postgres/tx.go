package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Tx returns the pgx.Tx of the delivery the handler is working on, in a subscription mounted
// with sqlqueue.Transactional(). What the handler writes through it commits together with an
// ack's settlement; every other outcome rolls it back first (in the row-lock form, to a
// savepoint inside the claim transaction). The outcome commits or rolls back: the handler must
// not call Commit or Rollback on it. Outside transactional mode Tx returns
// sqlqueue.ErrNotTransactional.
func Tx(ctx context.Context) (pgx.Tx, error) {
	return sqlqueue.TxAs[pgx.Tx](ctx)
}
