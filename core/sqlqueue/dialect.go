package sqlqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// This file is the contract between the engine and a dialect module (dialect-sqlite,
// dialect-postgres, dialect-mysql). The engine never imports a driver: it runs statements
// through the connection surface below (Queryer, Transaction, Conn, DB) and spells them with
// the Dialect. A dialect module
//
//   - adapts its driver to DB (database/sql drivers use StdDB; pgx writes a small adapter),
//   - implements Dialect, plus LeaseDialect, RowLockDialect and/or AdvisoryDialect for the claim
//     forms it supports (a form it lacks has no constructor, so it cannot be mounted),
//   - offers endpoint constructors that call NewLease, NewRowLock or NewAdvisory,
//   - runs sqlqueuetest.Run from its own tests.
//
// These interfaces only grow: methods are never removed or changed, and new capabilities come
// as optional interfaces discovered by type assertion (as Mover, Notifier and Pipeliner are).

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

// ColumnKind is the broad kind of a column as the catalogue reports it, so that the start-up
// check can refuse a column whose type cannot hold what the engine writes into it (an attempt
// column that holds text, a locked_until that is a boolean). Which kinds each column accepts is
// listed on Columns.
type ColumnKind uint8

const (
	// KindUnknown is a type the dialect does not classify; it is accepted for any column. A
	// dialect that knows a type to be none of the kinds below says KindOther instead.
	KindUnknown ColumnKind = iota
	// KindInteger is an integer type.
	KindInteger
	// KindText is a character type.
	KindText
	// KindBytes is a binary type.
	KindBytes
	// KindJSON is a JSON type.
	KindJSON
	// KindTime is a date/time type.
	KindTime
	// KindBool is a boolean type (PostgreSQL boolean; MySQL's BOOLEAN is TINYINT(1), which a
	// dialect may report as KindBool by its declared type).
	KindBool
	// KindFloat is a floating-point or decimal type (real, double, numeric, decimal).
	KindFloat
	// KindOther is a type the dialect recognises as none of the kinds above (a UUID, an
	// interval, an enum); no column of a queue table accepts it.
	KindOther
)

func (k ColumnKind) String() string {
	switch k {
	case KindInteger:
		return "integer"
	case KindText:
		return "text"
	case KindBytes:
		return "bytes"
	case KindJSON:
		return "json"
	case KindTime:
		return "time"
	case KindBool:
		return "boolean"
	case KindFloat:
		return "floating-point"
	case KindOther:
		return "other"
	}
	return "unknown"
}

// ColumnInfo is one column of a table as the catalogue has it.
type ColumnInfo struct {
	// Name is the column's name as stored (case preserved).
	Name string
	// Type is the declared type, for error messages.
	Type string
	// Kind classifies Type.
	Kind ColumnKind
}

// Dialect spells SQL for one database. The engine renders every statement once per
// subscription from these methods and validated identifiers; nothing from users reaches SQL
// unquoted (custom events excepted: their SQL is the user's own).
type Dialect interface {
	// Name names the dialect in errors and logs: "sqlite", "postgres", "mysql", "mariadb". No
	// behaviour keys on it: what a dialect can do, it declares through the optional interfaces
	// of this file (SQLFamily, SingleWriter, DDLTypes, …).
	Name() string
	// Quote quotes one identifier (already validated by the engine: letters, digits, _ and $).
	Quote(ident string) string
	// Placeholder is the n-th parameter marker of a statement, 1-based: "?" or "$1".
	Placeholder(n int) string
	// Time converts a timestamp the engine computed (UTC, microsecond precision) into the
	// argument stored in retry_after, locked_until, processed_at and created_at. Equal times
	// must give equal stored values (lease tokens are compared with =) and stored values must
	// order as the times do.
	Time(t time.Time) any
	// Returning reports whether INSERT … RETURNING works; without it Publish reads
	// Result.LastInsertID.
	Returning() bool
	// Columns lists the columns of the table t as the catalogue has them; an empty list means
	// the table does not exist.
	Columns(ctx context.Context, q Queryer, t TableRef) ([]ColumnInfo, error)
}

// ClaimParams are the values of one claim.
type ClaimParams struct {
	// Now is the claim time: rows with retry_after or locked_until after it are not ready.
	Now time.Time
	// Token is the lease the claim stamps into locked_until (lease form only).
	Token time.Time
	// Limit is the most rows to claim.
	Limit int
	// Group is the queue's group (tables with a group column).
	Group string
}

// Claimed is one claimed row.
type Claimed struct {
	// ID is the row's id.
	ID int64
	// Payload is the payload column.
	Payload []byte
	// Attempt is the attempt of this delivery (1 on the first), as the form counts it.
	Attempt int
	// Headers is the raw headers column (a JSON object of strings), nil when absent or NULL.
	Headers []byte
	// CreatedAt is the created_at column, zero when absent or NULL.
	CreatedAt time.Time
}

// Claim takes ready rows. The engine calls it inside the transaction it commits (lease form)
// or keeps open until settlement (row-lock form). It appends claimed rows to dst in id order.
type Claim interface {
	Claim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error)
}

// LeaseDialect is a Dialect that can claim by lease: stamp locked_until = token and
// attempt = attempt + 1 on ready rows and return them, inside one transaction the engine then
// commits. Most dialects return UpdateReturningClaim or SelectThenUpdateClaim.
type LeaseDialect interface {
	Dialect
	LeaseClaim(s *Schema) (Claim, error)
}

// RowLockDialect is a Dialect that can claim by row lock: select ready rows locking them
// (FOR UPDATE SKIP LOCKED) inside a transaction the engine keeps open until every claimed
// row is settled. Claimed.Attempt is the stored attempt + 1: the row-lock form counts the
// attempt in the statement that returns the row. Most dialects return SelectClaim.
type RowLockDialect interface {
	Dialect
	RowLockClaim(s *Schema) (Claim, error)
}

// AdvisoryDialect is a Dialect with advisory key locks held by a connection.
//
// The contract the advisory form relies on:
//
//   - A key is exclusive across every claimant of the database: every connection of every
//     pool, in every process, that may claim the same table. TryLock refuses a key another
//     connection holds. Keys held in one process's memory (LocalKeys) do not meet this across
//     processes; such a dialect must refuse an advisory subscription of a second process on
//     the same database (LocalKeys.Hold) rather than let two hold one row.
//   - TryLock need not be re-entrant: the engine takes at most one key per connection at a
//     time (it reserves a connection per worker, Workers(n)) and unlocks it before that
//     connection takes another. A re-entrant implementation (PostgreSQL's, MySQL's, LocalKeys)
//     is fine; one Unlock must then still release a key taken once.
//   - Keys belong to the connection, and go with it: the engine discards a connection whose
//     Unlock failed (Conn.Discard), and a connection lost with the server, and relies on that
//     releasing every key the connection held, as a server session's locks end with the
//     session. A dialect whose keys are not server state releases them in its Conn's Discard
//     (LocalKeys.ReleaseConn). When a subscription stops, the engine unlocks the keys of the
//     rows it gave back, then returns its connections to the pool (Conn.Close).
//   - Keys are text: a prefix naming the table (canonical with TableIdentity) and a colon,
//     then the KeyText of the row. A dialect may hash them to what its server takes, provided
//     distinct keys rarely collide (a collision only serialises two rows).
//
// sqlqueuetest checks the first three on the fixture's DB (Behaviour/advisory/key_contract).
type AdvisoryDialect interface {
	Dialect
	// TryLock takes key on c without waiting and reports whether it got it: false, with no
	// error, when another connection holds it.
	TryLock(ctx context.Context, c Conn, key string) (bool, error)
	// Unlock releases key taken on c.
	Unlock(ctx context.Context, c Conn, key string) error
	// KeyText wraps a SQL expression so that it reads back as text (the advisory key
	// expression of a queue, by default its id column).
	KeyText(expr string) string
}

// AdvisoryFilter is an optional interface of an AdvisoryDialect whose database can tell, inside
// a query, whether an advisory key is held by any session (PostgreSQL's pg_locks, MySQL's
// IS_USED_LOCK). The engine then adds it to the advisory form's candidates query, so rows whose
// key another claimant holds are skipped without a TryLock round trip and never fill the
// candidate window while free rows wait behind them.
type AdvisoryFilter interface {
	// KeyFree returns a SQL predicate that holds when the key TryLock would be given for a row
	// is held by no session. That key is prefix (the table's name, canonical where the dialect
	// is a TableIdentity, and a colon: text to spell as a string literal, escaped as the
	// dialect escapes literals, since a schema from the catalogue may hold any character)
	// followed by the text of keyText (the KeyText expression over the row).
	KeyFree(prefix, keyText string) string
}

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

// TableIdentity is an optional interface of an AdvisoryDialect whose tables can be spelled
// several ways: with or without the schema (database) unqualified names resolve to, or in
// another case where the server folds it. The advisory form names every key after the table,
// and two spellings of one table must give one name, or two subscriptions would hold the same
// row at once; the engine asks once, when a subscription opens, and names the keys after the
// TableRef returned. Without it keys are named after the table as the subscription spells it.
type TableIdentity interface {
	// CanonicalTable returns the table t names as the server identifies it: its schema
	// resolved from the catalogue when t has none, and both names as the catalogue stores
	// them. Every spelling of one table gives the same TableRef.
	CanonicalTable(ctx context.Context, q Queryer, t TableRef) (TableRef, error)
}

// Family names the SQL a database speaks: its grammar (comments, string literals, quoting),
// its types and its functions. It is a declared capability, not a dialect's name: a dialect
// written for another driver of a database that settle knows (a pure-Go SQLite driver)
// declares that database's family, and custom events, plugins and tools that keep SQL per
// family treat it as they treat settle's own dialect for it. A dialect of a database settle
// has no dialect for may declare a family of its own (Family("duckdb")) for plugins that keep
// SQL for it.
type Family string

// The families of the databases settle's own dialects serve.
const (
	FamilySQLite   Family = "sqlite"
	FamilyPostgres Family = "postgres"
	FamilyMySQL    Family = "mysql"
	FamilyMariaDB  Family = "mariadb"
)

// SQLFamily is an optional interface of a Dialect that declares the family of SQL its
// database speaks.
type SQLFamily interface {
	Family() Family
}

// FamilyOf returns the family d declares (SQLFamily), or "" for a dialect that declares none:
// never its Name, so a dialect is not taken for another by what it is called. Custom events
// (EventInput.Dialect), plugins and telemetry are told it.
func FamilyOf(d Dialect) Family {
	if f, ok := d.(SQLFamily); ok {
		return f.Family()
	}
	return ""
}

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

// SingleWriter is an optional interface of a Dialect whose database runs one write transaction
// at a time (SQLite: a write transaction holds the whole file). Code that would keep several
// write transactions open at once, each waiting for the others (several row-lock claims of one
// subscription, which stay open while their handlers run), runs one at a time instead:
// sqlqueuetest runs such cases with one worker.
type SingleWriter interface {
	// SingleWriter reports whether the database has one writer at a time.
	SingleWriter() bool
}

// IsSingleWriter reports whether d declares one writer at a time.
func IsSingleWriter(d Dialect) bool {
	s, ok := d.(SingleWriter)
	return ok && s.SingleWriter()
}

// DDLTypes is an optional interface of a Dialect that spells the column types of the tables
// settle creates for a service besides queue tables (outbox.DDL); a dialect module's own
// TableDDL may use them too. Without it those helpers refuse the dialect, naming what to
// create by hand.
type DDLTypes interface {
	DDLTypes() Types
}

// Types are a dialect's column types for the tables settle creates.
type Types struct {
	// ID is an auto-incrementing integer primary key ("INTEGER PRIMARY KEY AUTOINCREMENT",
	// "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "BIGINT AUTO_INCREMENT PRIMARY KEY").
	ID string
	// Integer is an integer column.
	Integer string
	// Text is a text column short enough to index (names, destinations).
	Text string
	// Bytes is a binary column of any length (payloads).
	Bytes string
	// JSON is a column for a JSON document (headers).
	JSON string
	// Time is a timestamp column in which Dialect.Time's values order as the times do.
	Time string
	// TableOptions follow a CREATE TABLE's closing parenthesis (" ENGINE=InnoDB DEFAULT
	// CHARSET=utf8mb4"); empty for none.
	TableOptions string
}

// IdentifierLimit is an optional interface of a Dialect whose server limits the length of an
// identifier (table, schema, column). NewSchema, and with it every endpoint, publisher and DDL
// helper, refuses a longer name with an error naming the limit, instead of letting the server
// refuse it later or truncate it silently (PostgreSQL). Without it the engine sets no limit
// (SQLite has none).
type IdentifierLimit interface {
	// MaxIdentifier is the most characters an identifier may have (identifiers are ASCII, so
	// characters and bytes agree): 63 on PostgreSQL, 64 on MySQL and MariaDB.
	MaxIdentifier() int
}

// CheckIdentifier refuses name, which names what ("table name", "name of the id column"),
// when it is longer than d's IdentifierLimit allows; nil when d has no limit.
func CheckIdentifier(d Dialect, what, name string) error {
	l, ok := d.(IdentifierLimit)
	if !ok || len(name) <= l.MaxIdentifier() {
		return nil
	}
	return fmt.Errorf("sqlqueue: %s %q is %d characters; %s allows at most %d", what, name, len(name), d.Name(), l.MaxIdentifier())
}

// ByIDHints is an optional interface of a Dialect whose optimizer has to be told how to find
// the rows of the engine's statements that name many rows by id (… AND id IN (…)): the
// grouped settlements of the lease and row-lock forms and the UPDATE of SelectThenUpdateClaim.
// The engine asks for the start of each such statement once, when it renders it; statements
// that do not come from the engine (a handler's SQL through the delivery's transaction, custom
// events) are never changed. MySQL and MariaDB pin the primary key with FORCE INDEX (PRIMARY):
// a queue table's statistics are nearly always stale, and a scanning DELETE locks rows other
// claimants hold.
type ByIDHints interface {
	// UpdateByIDs returns the start of such an UPDATE of the quoted table qtable, up to the
	// " SET" that follows it: "UPDATE " + qtable when nothing is to be added.
	UpdateByIDs(qtable string) string
	// DeleteByIDs returns the start of such a DELETE from qtable, up to the " WHERE" that
	// follows it: "DELETE FROM " + qtable when nothing is to be added.
	DeleteByIDs(qtable string) string
}

// updateByIDs and deleteByIDs start the engine's statements that name many rows by id.
func updateByIDs(d Dialect, qtable string) string {
	if h, ok := d.(ByIDHints); ok {
		return h.UpdateByIDs(qtable)
	}
	return "UPDATE " + qtable
}

func deleteByIDs(d Dialect, qtable string) string {
	if h, ok := d.(ByIDHints); ok {
		return h.DeleteByIDs(qtable)
	}
	return "DELETE FROM " + qtable
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

// ConnLoss is an optional interface of a Dialect that tells a lost or refused connection (the
// server restarted, the network dropped, the server is not accepting connections yet) from
// other errors. On such an error a claim does not fail the subscription's Next (which would
// escalate core's backoff, up to seconds, while the server restarts): the engine replaces the
// connection, or waits for the server itself with a short backoff capped at ReconnectMax, and
// claims again as soon as it answers. Dedicated connections (advisory form) that went stale are
// replaced the same way.
type ConnLoss interface {
	// ConnLost reports whether err means the connection was lost or could not be made.
	ConnLost(err error) bool
}

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

// Notifier is an optional interface of a Dialect whose database can tell other processes that
// a queue has new rows (PostgreSQL LISTEN/NOTIFY). Publishing in one process always wakes that
// process's claimants; a Notifier extends that across processes.
type Notifier interface {
	// Notify announces new rows for the queue inside q (the publishing transaction or pool).
	Notify(ctx context.Context, q Queryer, queue QueueRef) error
	// Listen calls wake (which never blocks) whenever rows for the queue may be ready, until
	// stop is called.
	Listen(ctx context.Context, db DB, queue QueueRef, wake func()) (stop func(), err error)
}

// TableRef names a table: an optional schema and a name.
type TableRef struct {
	Schema, Name string
}

func (t TableRef) String() string {
	if t.Schema != "" {
		return t.Schema + "." + t.Name
	}
	return t.Name
}

// QueueRef names a queue: a table and, in a table with a group column, a group.
type QueueRef struct {
	Table TableRef
	Group string
}
