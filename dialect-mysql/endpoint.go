package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// RowLock returns the row-lock endpoint of the queue table t (and group, in a table with a
// group column; "" otherwise). A claim selects up to a batch of ready rows with
// SELECT … FOR UPDATE SKIP LOCKED in a transaction at the DB's isolation level, every
// delivery's finishing statement runs in it, and its commit is the settlement of all of them.
// The transaction and its connection stay open while the handlers work: size the pool for one
// connection per claim in flight.
func RowLock(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	ep, err := sqlqueue.NewRowLock(db.dialect, db.q, t, group)
	if err != nil {
		return nil, err
	}
	return db.wrap(ep, t, sqlqueue.FormRowLock), nil
}

// Lease returns the lease endpoint of the queue table t (see RowLock for group). A claim
// selects ready rows with FOR UPDATE SKIP LOCKED and stamps locked_until (the delivery's token,
// microsecond DATETIME(6)) and attempt + 1 in one short transaction; every finishing statement
// is fenced by the token, and one that matches no row reports sqlqueue.ErrLeaseLost.
func Lease(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	ep, err := sqlqueue.NewLease(db.dialect, db.q, t, group)
	if err != nil {
		return nil, err
	}
	return db.wrap(ep, t, sqlqueue.FormLease), nil
}

// Advisory returns the advisory-lock endpoint of the queue table t (see RowLock for group).
// Each worker holds a dedicated connection; a row is taken with GET_LOCK(name, 0) on it, where
// the name carries the database, the table and the row's key (sqlqueue.AdvisoryKey; default
// the id), hashed when longer than 64 characters. Rows whose key another connection holds are
// filtered out of the claim with IS_USED_LOCK. The finishing statement commits on that
// connection, then RELEASE_LOCK frees the key; a release the server does not confirm closes
// the connection, which frees whatever it held. A pool capped by SetMaxOpenConns must allow one
// connection per worker plus one for claims; a subscription checks it at start.
func Advisory(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	ep, err := sqlqueue.NewAdvisory(db.dialect, db.q, t, group)
	if err != nil {
		return nil, err
	}
	return db.wrap(ep, t, sqlqueue.FormAdvisory), nil
}

// NewPublisher returns a publisher into the queue table t (and group). On MariaDB the new
// row's id comes back through INSERT … RETURNING, on MySQL through LAST_INSERT_ID(). Its clock
// is the DB's (WithClock) unless opts set one.
func NewPublisher(db *DB, t sqlqueue.Table, group string, opts ...sqlqueue.PublisherOption) (*sqlqueue.Publisher, error) {
	return sqlqueue.NewPublisher(db.dialect, db.q, t, group, append([]sqlqueue.PublisherOption{sqlqueue.PublishClock(db.clock)}, opts...)...)
}

// Tx returns the *sql.Tx of the delivery the handler is working on, in a subscription mounted
// with sqlqueue.Transactional(): what the handler writes through it commits with an ack and is
// rolled back by every other outcome (to a savepoint in the row-lock form).
func Tx(ctx context.Context) (*sql.Tx, error) { return sqlqueue.TxAs[*sql.Tx](ctx) }

// InTx publishes inside the caller's own transaction: the row exists exactly when tx commits.
func InTx(tx *sql.Tx) sqlqueue.PublishOption { return sqlqueue.InTx(&txn{tx: tx}) }

// Dialect returns the dialect the DB's endpoints spell their statements with, for custom
// events and sqlqueue.NewPublisher.
func (db *DB) Dialect() sqlqueue.Dialect { return db.dialect }

// endpoint is the engine's endpoint plus the checks only MySQL's catalogue can answer.
type endpoint struct {
	core.Endpoint
	db   *DB
	t    sqlqueue.Table
	form sqlqueue.Form
}

func (db *DB) wrap(ep core.Endpoint, t sqlqueue.Table, f sqlqueue.Form) core.Endpoint {
	return &endpoint{Endpoint: ep, db: db, t: t, form: f}
}

// Open lets the engine check the table and start, then checks what the engine cannot ask a
// dialect-neutral catalogue: that id is the primary key, and that the time columns keep
// microseconds.
func (e *endpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := e.Endpoint.Open(ctx, sub)
	if err != nil {
		return nil, nil, err
	}
	if err := e.db.checkCatalogue(ctx, e.t, e.form); err != nil {
		_ = src.Close()
		return nil, nil, err
	}
	if err := e.db.checkPool(e.form, sub); err != nil {
		_ = src.Close()
		return nil, nil, err
	}
	return src, fin, nil
}

// checkPool refuses an advisory subscription that the pool cannot serve: each worker holds a
// dedicated connection for as long as the subscription runs, and the claims' candidate queries
// need one more; with fewer the subscription would wait for a connection forever.
func (db *DB) checkPool(f sqlqueue.Form, sub core.Subscription) error {
	max := db.pool.Stats().MaxOpenConnections
	if f != sqlqueue.FormAdvisory || max == 0 || sub.Options == nil {
		return nil
	}
	if need := sub.Options.Workers + 1; max < need {
		return fmt.Errorf("mysql: advisory subscription %q with %d workers needs %d connections (one held per worker, one for claims); the pool allows %d (SetMaxOpenConns)",
			sub.Name, sub.Options.Workers, need, max)
	}
	return nil
}

const primaryKeySQL = `SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY'
ORDER BY ORDINAL_POSITION`

// checkCatalogue refuses a table whose primary key is not the id column alone (claims order
// by it and every statement finds rows by it), and a locked_until or retry_after column that
// drops microseconds: a lease token must compare exactly, and a delay must not end early.
func (db *DB) checkCatalogue(ctx context.Context, t sqlqueue.Table, f sqlqueue.Form) error {
	ref := t.Ref()
	id := t.Columns.ID
	if id == "" {
		id = "id"
	}
	rows, err := db.pool.QueryContext(ctx, primaryKeySQL, ref.Schema, ref.Name)
	if err != nil {
		return fmt.Errorf("mysql: reading the primary key of %s: %w", ref, edgeErr(err))
	}
	var pk []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: reading the primary key of %s: %w", ref, edgeErr(err))
		}
		pk = append(pk, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: reading the primary key of %s: %w", ref, edgeErr(err))
	}
	if len(pk) != 1 || !equalFold(pk[0], id) {
		return &sqlqueue.ColumnError{Table: ref.String(), Column: id, Role: "id",
			Reason: fmt.Sprintf("must be the table's primary key on its own (the primary key is %v): claims order by it and settlements find rows by it", pk)}
	}
	cols, err := readColumns(ctx, db.q, ref)
	if err != nil {
		return err
	}
	for _, c := range []struct{ role, name string }{{"locked_until", t.Columns.LockedUntil}, {"retry_after", t.Columns.RetryAfter}} {
		if c.name == "" || (c.role == "locked_until" && f != sqlqueue.FormLease) {
			continue
		}
		for _, col := range cols {
			if equalFold(col.Name, c.name) && col.Kind == driver.KindTime && col.precision < 6 {
				why := "the lease token is a microsecond time and must compare equal to what the claim stored"
				if c.role == "retry_after" {
					why = "a delay would end up to a second early"
				}
				return &sqlqueue.ColumnError{Table: ref.String(), Column: col.Name, Role: c.role,
					Reason: fmt.Sprintf("type %s keeps %d fractional digits; it must be DATETIME(6) or TIMESTAMP(6): %s", col.Type, col.precision, why)}
			}
		}
	}
	return nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
