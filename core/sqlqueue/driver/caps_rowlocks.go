package driver

import (
	"context"
	"time"
)

// This file holds the capabilities of a database that locks rows one by one: the lock
// clauses and timeouts, what its locking reads lock, and the index and order its claims read.

// RowLocking is an optional interface of a Dialect whose database locks rows one by one
// (PostgreSQL, MySQL, MariaDB; not SQLite, whose write transaction holds the whole database),
// so that another session can hold a claimed row (a service's own SELECT … FOR UPDATE) while the
// engine wants to write it. With it the engine
//
//   - extends leases without waiting on rows another session holds: one transaction locks the
//     free rows (LockClause), takes the new lease end from the clock once it holds them, and
//     renews them; a held row is then waited for alone, in its own transaction, for at most the
//     subscription's lock timeout, and its lease end is again taken once the lock is granted,
//     so an end that was due before the wait is never written after it;
//   - bounds every wait for a row lock in a settling transaction (lease flushes, advisory
//     settlements) by the lock timeout (sqlqueue.LockTimeout): the statement fails instead of
//     stalling the subscription.
//
// Without it, the engine bounds those statements by a client-side deadline only.
type RowLocking interface {
	// LockClause is the clause that makes a SELECT lock the rows it returns: with skip, one
	// that skips the rows another transaction holds (" FOR UPDATE SKIP LOCKED"), without, one
	// that waits for them (" FOR UPDATE"), a wait the LockTimeout statement bounds.
	LockClause(skip bool) string
	// LockTimeout returns the statement that makes each later statement fail after waiting d
	// for a row lock instead of waiting longer: for the rest of the current transaction
	// (PostgreSQL: SET LOCAL lock_timeout), or with session set for the rest of the session
	// (SET lock_timeout), which the engine uses on the connections it dedicates to a
	// subscription (advisory form) and discards when it closes. Where the server has no
	// per-transaction setting (MySQL, MariaDB: innodb_lock_wait_timeout) both set the
	// session's; the engine runs it at the start of every transaction it bounds, so each
	// sees the subscription's value.
	LockTimeout(d time.Duration, session bool) string
}

// ReturnedRowLocks is an optional interface of a RowLocking dialect whose locking reads lock
// only the rows they return (PostgreSQL), where InnoDB's lock every row they examine until the
// transaction ends. The engine then looks for lapsed rows (a locking read that skips held rows)
// in the background, beside its own claims, instead of between them: a claim of its own cannot
// hide a lapsed row from that look. Without it a RowLocking dialect's look runs between claims.
type ReturnedRowLocks interface {
	// LocksOnlyReturnedRows reports that LockClause locks only the rows a SELECT returns.
	LocksOnlyReturnedRows() bool
}

// ClaimIndex is an optional interface of a RowLocking dialect whose database locks the index
// entries a locking read passes through as well as the rows it returns, and keeps them (InnoDB:
// a SELECT … FOR UPDATE SKIP LOCKED that reaches a row through a secondary index locks the
// row's entry there, and when it then skips the row, held by another transaction, it keeps
// that lock). A claim that reached its rows by the primary key (the row-lock form locks the rows
// it counted again by id) would then wait, when it settles them, for every claim that passed
// over them through the ready index; and a claim transaction stays open while its handlers
// run. So the engine has every claim of a table reach its rows through one index, the one
// ClaimIndexHint names.
type ClaimIndex interface {
	// ClaimIndexHint returns what follows the quoted table in the claims' locking SELECTs
	// (Schema.ClaimHint): the index whose first columns are leading, the unquoted columns
	// every claim compares with a constant (group, processed_at; none when the table has
	// neither), or the primary key when leading is empty or no index starts with them. It is
	// asked once per subscription, when it starts.
	ClaimIndexHint(ctx context.Context, q Queryer, t TableRef, leading []string) (string, error)
}

// GroupOrder is an optional interface of a Dialect whose planner has to be shown, by the shape
// of the claims, that the ready index gives their rows in order. PostgreSQL's does not see it
// otherwise: with the group compared by equality, ORDER BY id can come from the primary key as
// well as from an index on (group, id), and the planner reads the table in id order through
// every processed row and dead letter in front of the ready ones whenever its statistics make
// the filter look cheap (statistics taken before the rows were processed, or dead letters
// spread over the table). Where GroupOrdered reports true, the engine's statements that look
// for ready rows (the claims, the advisory candidates, the looks for lapsed rows, the row-lock
// form's counting) compare the group as a range of one value, group >= $g AND group <= $g,
// which a btree operator class makes the same rows as group = $g, and order by group, id: the
// order of the same rows, which only an index that starts with (group, id) gives without a
// sort. Other dialects' statements are not changed.
type GroupOrder interface {
	// GroupOrdered reports whether the claims of table t (validated, with a group column)
	// can read its ready rows through an index whose first keys are the group and id columns,
	// and which every claim can use (no predicate, or the one of the DDL's ready index). It is
	// asked once per subscription, when it starts.
	GroupOrdered(ctx context.Context, q Queryer, t Table) (bool, error)
}
