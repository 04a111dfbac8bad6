package driver

// This file holds the capabilities that settle many rows, or move one, with a single
// statement.

// GroupedRowLock is an optional interface of a RowLockDialect whose database settles many
// locked rows of one claim safely with one statement (DELETE … WHERE id IN (…), or the
// statement of a GroupedRowLockSQL). The engine then runs a claim's plain acks and drops that
// way at its commit instead of one statement per row.
type GroupedRowLock interface {
	GroupRowLockSettlements() bool
}

// GroupedRowLockSQL is an optional interface of a GroupedRowLock dialect that spells the
// grouped settlement of a claim itself, where the engine's "… WHERE id IN (…)" would not be
// safe. InnoDB reads an IN-list as ranges of the primary key and locks the row past the end of
// each range before it sees that row is outside: a row another claim holds, which turns
// concurrent claims' settlements into lock waits and deadlocks. MySQL and MariaDB instead look
// each id up by the primary key alone (a join driven by the list of ids), which locks only the
// rows the claim already holds, so the statement never waits.
//
// The engine gives the statement the ids of the claim's grouped rows, in ascending order, at
// most the flush size (FlushLimits) at a time, all of them rows the claim's transaction holds.
type GroupedRowLockSQL interface {
	GroupedRowLock
	// SettleByIDs returns the statement that settles n rows of the quoted table qtable, named
	// by the quoted id column: it deletes them when mark is "", and otherwise sets the quoted
	// column mark (processed_at) to its last argument. Its first n arguments are the ids. It
	// must match every named row once (its affected rows are checked against n).
	SettleByIDs(qtable, id, mark string, n int) string
}

// GroupedRowLockArray is an optional interface of a GroupedRowLock dialect whose driver binds a
// list of ids as one array argument (PostgreSQL: … WHERE id = ANY($1)). The engine then settles
// a claim's grouped rows with that statement, one argument for all the ids instead of one
// each: the driver encodes and the server binds one value (a DB whose driver takes no array
// converts the []int64 itself: MySQL's makes it the text of a JSON array). It comes before a
// GroupedRowLockSQL dialect's statement, where it is not "".
type GroupedRowLockArray interface {
	GroupedRowLock
	// SettleByIDArray returns the statement that settles the rows of the quoted table qtable
	// whose quoted id column is in its first argument, a []int64 in ascending order (at most
	// the flush size of FlushLimits, all rows the claim's transaction holds): it deletes them
	// when mark is "", and otherwise sets the quoted column mark (processed_at) to its second
	// argument. It must match every id once (its affected rows are checked against their
	// number). "" when the database has no such statement: the engine then uses SettleByIDs
	// (GroupedRowLockSQL) or its IN-list.
	SettleByIDArray(qtable, id, mark string) string
}

// Mover is an optional interface of a Dialect that moves a row to another table in one
// statement (PostgreSQL: WITH moved AS (DELETE … RETURNING …) INSERT … SELECT …). Without it
// the engine copies, then deletes, in one transaction.
type Mover interface {
	// MoveStatement returns the statement that deletes the rows of from matching where and
	// inserts them into to: insertCols are the target's (quoted) columns, selectExprs the
	// expressions over the deleted row that fill them, in order. where uses placeholders
	// starting at 1.
	MoveStatement(from, to string, insertCols, selectExprs []string, where string) string
}
