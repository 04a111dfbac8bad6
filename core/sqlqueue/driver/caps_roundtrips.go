package driver

import (
	"context"
	"errors"
)

// This file holds the capabilities that save round trips and copies: pipelines, pipelined
// transactions, and payloads kept as the driver handed them over.

// Pipeliner is an optional interface of a DB whose driver sends several statements in one
// round trip and runs them as one transaction (PostgreSQL: a pgx batch, which the extended
// protocol runs in one implicit transaction). The lease form then settles the finished
// deliveries of a flush and claims the next batch with one round trip and one commit, instead
// of BEGIN, the settlement, the claim and COMMIT.
type Pipeliner interface {
	// Pipeline runs steps in order, in one transaction, with one round trip. It commits only if
	// every step succeeds; rows a Step read count only when Pipeline returns nil. A step whose
	// statement changes another number of rows than its Want rolls the whole pipeline back, and
	// Pipeline returns an error matching ErrRowCount. After any other error the pipeline may or
	// may not have committed, as after a failed COMMIT.
	Pipeline(ctx context.Context, steps []Step) error
}

// Step is one statement of a pipeline.
type Step struct {
	// SQL and Args are the statement, as for Queryer.
	SQL  string
	Args []any
	// Want, when positive, is the number of rows the statement must change exactly. Such a
	// statement is an UPDATE or DELETE without a RETURNING clause and without a WITH clause
	// of its own (the dialect wraps it to check the count on the server).
	Want int64
	// Rows, when set, reads the rows the statement returns, before Pipeline returns.
	Rows func(Rows) error
}

// TxPipeliner is an optional interface of a DB whose driver sends a transaction's BEGIN with
// its first statement, and its last statement with its COMMIT, one round trip each (PostgreSQL:
// pgx batches on the transaction's connection). The row-lock form then opens a claim's
// transaction with the claim itself and commits it with the claim's grouped settlement: two
// round trips a claim instead of four, for the same statements in the same transaction. It is
// not used in transactional mode, whose handlers unwrap the driver's own transaction.
type TxPipeliner interface {
	// BeginPipelined starts a transaction that sends its BEGIN with its first statement (one
	// that never runs a statement sends none). Its Unwrap may return nil.
	BeginPipelined(ctx context.Context) (PipelinedTx, error)
}

// PipelinedTx is a transaction that a TxPipeliner began.
type PipelinedTx interface {
	Transaction
	// CommitWith runs step's statement and commits the transaction, in one round trip (Rows is
	// not used; Want is checked as in Pipeline). It ends the transaction either way: a statement
	// that fails, or changes another number of rows than its Want (an error matching
	// ErrRowCount), rolls it back; after any other error it may or may not have committed, as
	// after a failed Commit.
	CommitWith(ctx context.Context, step Step) error
}

// ErrRowCount is the error a Pipeliner returns when a step changed another number of rows than
// it wants; nothing in the pipeline was committed.
var ErrRowCount = errors.New("sqlqueue: a pipelined statement changed another number of rows than it wants; the pipeline was rolled back")

// DriverOwnedBytes is an optional interface of a Dialect whose driver hands every []byte
// column value over in memory of its own, allocated for that value and never reused
// (mattn/go-sqlite3 copies each BLOB out of SQLite). A claim then keeps a row's payload as the
// driver gave it, where database/sql's Scan into a *[]byte would copy it once more (most
// drivers reuse their buffers from row to row).
type DriverOwnedBytes interface {
	// DriverOwnedBytes reports whether the driver's []byte values may be kept as they are.
	DriverOwnedBytes() bool
}

// ownsBytes reports whether d declares DriverOwnedBytes.
func ownsBytes(d Dialect) bool {
	o, ok := d.(DriverOwnedBytes)
	return ok && o.DriverOwnedBytes()
}
