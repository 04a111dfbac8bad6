package driver

import (
	"context"
	"database/sql"
	"time"
)

// This file is the connection surface: what the engine runs statements through. A dialect
// module adapts its driver to it (database/sql drivers use StdDB; pgx writes a small adapter).

// Result is what an Exec reports.
type Result struct {
	// RowsAffected is the number of rows the statement changed.
	RowsAffected int64
	// LastInsertID is the id the statement generated, where the driver reports one (MySQL);
	// zero otherwise.
	LastInsertID int64
}

// Queryer runs statements: a pool, a dedicated connection or a transaction. SQL uses the
// dialect's placeholders; args are plain Go values (int64, string, []byte, nil) and whatever
// Dialect.Time returns.
type Queryer interface {
	// Exec runs a statement that returns no rows.
	Exec(ctx context.Context, sql string, args ...any) (Result, error)
	// Query runs a statement that returns rows (a SELECT, or a statement with RETURNING).
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
}

// Rows is a result set, read as database/sql's *Rows is read. Close is idempotent.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// TimeDest is the destination the engine passes to Rows.Scan for a timestamp it reads back from
// claimed rows (created_at). It is a database/sql Scanner of a time.Time, text or NULL; a Rows
// whose driver decodes the column's timestamp itself may call SetTime instead, and spare the
// value its trip through an interface (dialect-postgres does, for timestamp and timestamptz
// columns).
type TimeDest interface {
	sql.Scanner
	// SetTime stores t (in UTC, as Scan stores a time.Time); the zero time stands for NULL.
	SetTime(t time.Time)
}

// Transaction is a database transaction.
type Transaction interface {
	Queryer
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// Unwrap returns the driver's own transaction (*sql.Tx, pgx.Tx), which dialects hand to
	// handlers in transactional mode.
	Unwrap() any
}

// Conn is one connection reserved from the pool: advisory locks live on it.
type Conn interface {
	Queryer
	// Begin starts a transaction on this connection.
	Begin(ctx context.Context) (Transaction, error)
	// Close gives the connection back to its pool.
	Close() error
	// Discard closes the connection for good (it is not returned to the pool): everything
	// the session held, advisory locks included, goes with it.
	Discard() error
	// Unwrap returns the driver's own connection (*sql.Conn, *pgxpool.Conn).
	Unwrap() any
}

// DB is a connection pool.
type DB interface {
	Queryer
	// Begin starts a transaction on some connection of the pool. A dialect whose claims need
	// a particular transaction mode (SQLite's BEGIN IMMEDIATE) configures it in its pool.
	Begin(ctx context.Context) (Transaction, error)
	// Conn reserves one connection.
	Conn(ctx context.Context) (Conn, error)
}
