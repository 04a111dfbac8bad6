package sqlqueue

import (
	"database/sql"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// The description of a queue table is shared with the dialects, which spell statements from it:
// it is defined in package driver, and these are its names here, where services write them.

// Table describes a queue table: its name and the names of its columns (see driver.Table).
type Table = driver.Table

// Columns names a queue table's columns; "" leaves an optional column out (see driver.Columns).
type Columns = driver.Columns

// TableRef names a table: an optional schema and a name.
type TableRef = driver.TableRef

// StandardTable returns a Table named name with every column under its default name: id,
// payload, grp, attempt, retry_after, locked_until, processed_at, headers, created_at (see
// driver.StandardTable).
func StandardTable(name string) Table { return driver.StandardTable(name) }

// ParseTableRef reads "name" or "schema.name" (a dead-letter table destination) and validates
// it (see driver.ParseTableRef).
func ParseTableRef(s string) (TableRef, error) { return driver.ParseTableRef(s) }

// ValidIdent reports whether s may be used as an identifier: a letter or _, then letters,
// digits, _ or $ (see driver.ValidIdent).
func ValidIdent(s string) bool { return driver.ValidIdent(s) }

// ColumnError is the start-up error for a table that lacks a column it was described with, or
// has it with a type of the wrong kind.
type ColumnError = driver.ColumnError

// Form is a claim form: what holds a row while its handler works.
type Form = driver.Form

// The claim forms.
const (
	// FormLease stamps locked_until (the delivery's token) and commits; every finishing
	// statement is fenced by the token.
	FormLease = driver.FormLease
	// FormRowLock holds the row with FOR UPDATE SKIP LOCKED in the claim transaction, whose
	// commit is the settlement.
	FormRowLock = driver.FormRowLock
	// FormAdvisory holds a key lock on a dedicated connection.
	FormAdvisory = driver.FormAdvisory
)

// The connection surface the engine runs statements through is defined in package driver too;
// services meet it when they publish inside their own transaction (InTx), use a delivery's
// transaction (Tx) or build publishers and operations views by hand (NewPublisher, NewOps).

// DB is a connection pool as the engine sees it (see driver.DB).
type DB = driver.DB

// Queryer runs statements: a pool, a dedicated connection or a transaction (see driver.Queryer).
type Queryer = driver.Queryer

// Transaction is a database transaction (see driver.Transaction).
type Transaction = driver.Transaction

// Result is what an Exec reports (see driver.Result).
type Result = driver.Result

// Rows is a result set (see driver.Rows).
type Rows = driver.Rows

// Dialect spells SQL for one database (see driver.Dialect).
type Dialect = driver.Dialect

// StdDB adapts a database/sql pool to DB, for dialects whose driver is a database/sql driver
// (see driver.StdDB).
func StdDB(db *sql.DB) DB { return driver.StdDB(db) }

// StdTx adapts a caller's *sql.Tx to Transaction, e.g. to publish inside it (see driver.StdTx).
func StdTx(tx *sql.Tx) Transaction { return driver.StdTx(tx) }

// Family names the SQL a database speaks (see driver.Family); custom events and plugins are
// told it (EventInput.Dialect).
type Family = driver.Family

// The families of the databases settle's own dialects serve.
const (
	FamilySQLite   = driver.FamilySQLite
	FamilyPostgres = driver.FamilyPostgres
	FamilyMySQL    = driver.FamilyMySQL
	FamilyMariaDB  = driver.FamilyMariaDB
)

// FamilyOf returns the family d declares (driver.SQLFamily), or "" for a dialect that declares
// none.
func FamilyOf(d Dialect) Family { return driver.FamilyOf(d) }
