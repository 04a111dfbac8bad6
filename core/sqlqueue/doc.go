// Package sqlqueue is settle's dialect-neutral SQL queue engine: queue tables in PostgreSQL,
// MySQL/MariaDB or SQLite, claimed in one of three forms, with every handler outcome turned
// into the finishing statement the form calls for.
//
// A queue table is described by a Table (StandardTable gives the default column names). A
// dialect module (dialect-sqlite, dialect-postgres, dialect-mysql) spells SQL for its database
// (Dialect) and offers constructors only for the claim forms it supports:
//
//	form      what holds the row                  where the finishing statement runs
//	lease     locked_until = the delivery token   any connection, fenced by the token
//	row lock  FOR UPDATE SKIP LOCKED              the claim transaction; its commit settles
//	advisory  a key lock on a dedicated conn      that connection, then the key is unlocked
//
// What each outcome writes:
//
//	outcome          row lock                      lease                          advisory
//	ack, drop        DELETE or set processed_at    same, WHERE locked_until=token same, then unlock
//	retry            attempt+1 (no attempt: none)  locked_until = NULL            none: unlock returns the row
//	retry_after(d)   retry_after, attempt+1        retry_after, locked_until=NULL retry_after, then unlock
//	cap reached      group := dead letter group, or the row moves to the dead-letter table
//	abandoned        rollback                      lease released at once         unlock
//
// Attempts are counted by the statement that returns the row (row lock), at the claim
// (lease) or when the row is taken (advisory); Message.Attempt is 1 on the first delivery in
// every form. Delays stay in the database (retry_after), so they survive restarts.
//
// Settlement is grouped by default, because a commit per message caps a queue at a few
// thousand messages a second while a commit per batch reaches tens of thousands: in the lease
// form finished deliveries are settled together (one token-fenced statement per token for ack
// and drop, the others in the same transaction), in the transaction of the next claim or on
// their own when a claim's worth has finished, when nothing else is outstanding, or after a
// short linger (FlushLimits), always well inside the lease; in the row-lock form a claim of
// BatchSize rows settles in its one transaction. The
// cost is latency: a settlement becomes durable up to the linger later, and in the row-lock
// form only when the claim's last row finishes. PerMessage commits each settlement on its own.
//
// # Why a row failed
//
// A table with a last_error column (Columns.LastError; StandardTable leaves it out) records,
// on every failed attempt — retry, retry after a delay, dead letter — why it failed:
// core.Reason of the outcome, the handler's cause or error text, at most core.MaxReasonBytes.
// A row waiting for its next attempt says why its last one failed; acks and drops leave the
// column as it was. A dead letter (a row moved to the dead-letter group, or copied to the
// dead-letter table) also gets core's dead-letter headers merged into its headers column, where
// the table has one: core.HeaderRetryCount (its final attempt), core.HeaderOrigin (the queue it
// came from), core.HeaderDeadAt and core.HeaderError (the reason); core.ParseDeadLetterInfo
// reads them back. Custom events receive the reason in EventInput.Reason.
//
// All time comes from the App's clock (core/clock): the engine computes every timestamp it
// writes, so tests run on virtual time. Dialect authors start from dialect.go; every dialect
// proves itself with the conformance suite in sqlqueuetest.
package sqlqueue
