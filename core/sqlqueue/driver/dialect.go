package driver

import (
	"context"
	"time"
)

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

// Form is a claim form: what holds a row while its handler works.
type Form uint8

const (
	// FormLease stamps locked_until (the delivery's token) and commits; every finishing
	// statement is fenced by the token.
	FormLease Form = iota + 1
	// FormRowLock holds the row with FOR UPDATE SKIP LOCKED in the claim transaction, whose
	// commit is the settlement.
	FormRowLock
	// FormAdvisory holds a key lock on a dedicated connection.
	FormAdvisory
)

func (f Form) String() string {
	switch f {
	case FormLease:
		return "lease"
	case FormRowLock:
		return "row lock"
	case FormAdvisory:
		return "advisory"
	}
	return "form(?)"
}
