// Package sqlitecore is the SQLite dialect both SQLite modules share: dialect-sqlite (package
// sqlite, on mattn/go-sqlite3 with cgo) and dialect-sqlite-purego (package sqlitepure, on
// modernc.org/sqlite without cgo). It imports no driver: it spells SQLite's SQL, reads its
// catalogue, keeps advisory keys in the process (driver.LocalKeys), renders a queue table's DDL,
// and holds the companion file's lock while an advisory subscription runs. Each module keeps
// only what its driver needs: opening the pool, telling a busy database from other errors, and
// what its driver does with the bytes it hands over.
package sqlitecore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Dialect spells SQL for SQLite. It supports the lease and advisory forms. A module embeds it
// in a dialect of its own, to add what its driver declares (driver.DriverOwnedBytes).
type Dialect struct {
	name, pkg string
	keys      *driver.LocalKeys // advisory keys: per database file, in this process
}

// NewDialect returns the dialect named name (Dialect.Name, in errors and logs) of the module
// whose package pkg starts its errors, whose advisory keys live in keys (nil: a dialect that
// only renders, TableDDL's).
func NewDialect(name, pkg string, keys *driver.LocalKeys) *Dialect {
	return &Dialect{name: name, pkg: pkg, keys: keys}
}

var (
	_ driver.LeaseDialect    = (*Dialect)(nil)
	_ driver.AdvisoryDialect = (*Dialect)(nil)
	_ driver.TableIdentity   = (*Dialect)(nil)
	_ driver.SQLFamily       = (*Dialect)(nil)
	_ driver.SingleWriter    = (*Dialect)(nil)
	_ driver.DDLTypes        = (*Dialect)(nil)
)

// Name names the dialect in errors and logs.
func (d *Dialect) Name() string { return d.name }

// Family is driver.FamilySQLite: custom events, event plugins and outbox DDL treat the SQL of
// both modules as SQLite's.
func (*Dialect) Family() driver.Family { return driver.FamilySQLite }

// SingleWriter is true: a write transaction holds the whole file.
func (*Dialect) SingleWriter() bool { return true }

// DDLTypes are SQLite's column types (times are TEXT in TimeFormat).
func (*Dialect) DDLTypes() driver.Types {
	return driver.Types{ID: "INTEGER PRIMARY KEY AUTOINCREMENT", Integer: "INTEGER", Text: "TEXT", Bytes: "BLOB", JSON: "TEXT", Time: "TEXT"}
}

// TimeFormat is how times are stored: UTC, microseconds, fixed width, so text order is time order.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Quote double-quotes an identifier.
func (*Dialect) Quote(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

// Placeholder is "?".
func (*Dialect) Placeholder(int) string { return "?" }

// Time formats t as TimeFormat text.
func (*Dialect) Time(t time.Time) any { return t.UTC().Format(TimeFormat) }

// ParseTime reads a time stored by Time.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// Returning is true: SQLite ≥ 3.35 has RETURNING.
func (*Dialect) Returning() bool { return true }

// Columns reads pragma_table_info.
func (*Dialect) Columns(ctx context.Context, q driver.Queryer, t driver.TableRef) ([]driver.ColumnInfo, error) {
	schema := t.Schema
	if schema == "" {
		schema = "main"
	}
	rows, err := q.Query(ctx, "SELECT name, type FROM pragma_table_info(?, ?)", t.Name, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.ColumnInfo
	for rows.Next() {
		var c driver.ColumnInfo
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		c.Kind = Kind(c.Type)
		out = append(out, c)
	}
	return out, rows.Err()
}

// CanonicalTable returns t as the database file lists it (pragma_table_list): schema "main"
// when t names none, and both names as they were created, since SQLite compares identifiers
// without regard to ASCII case (jobs, JOBS and main.Jobs are one table).
func (d *Dialect) CanonicalTable(ctx context.Context, q driver.Queryer, t driver.TableRef) (driver.TableRef, error) {
	schema := t.Schema
	if schema == "" {
		schema = "main"
	}
	rows, err := q.Query(ctx, "SELECT schema, name FROM pragma_table_list WHERE schema = ? COLLATE NOCASE AND name = ? COLLATE NOCASE", schema, t.Name)
	if err != nil {
		return driver.TableRef{}, fmt.Errorf(d.pkg+": resolving table %s: %w", t, err)
	}
	defer rows.Close()
	var out driver.TableRef
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return out, fmt.Errorf(d.pkg+": resolving table %s: %w", t, err)
		}
		return out, fmt.Errorf(d.pkg+": table %s does not exist", t)
	}
	if err := rows.Scan(&out.Schema, &out.Name); err != nil {
		return out, fmt.Errorf(d.pkg+": resolving table %s: %w", t, err)
	}
	return out, rows.Close()
}

// Kind follows SQLite's type affinity rules (INT first, so BIGINT is an integer), with JSON,
// date/time, boolean and floating-point names recognised.
func Kind(decl string) driver.ColumnKind {
	t := strings.ToUpper(decl)
	switch {
	case strings.Contains(t, "INT"):
		return driver.KindInteger
	case strings.Contains(t, "JSON"):
		return driver.KindJSON
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return driver.KindText
	case strings.Contains(t, "BLOB"), t == "":
		return driver.KindBytes
	case strings.Contains(t, "TIME"), strings.Contains(t, "DATE"):
		return driver.KindTime
	case strings.Contains(t, "BOOL"):
		return driver.KindBool
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return driver.KindFloat
	}
	return driver.KindUnknown // NUMERIC, DECIMAL: SQLite keeps text that is not a number as text
}

// LeaseClaim is one UPDATE … RETURNING; the claim transaction (BEGIN IMMEDIATE) holds the
// write lock, so no row lock is needed.
func (*Dialect) LeaseClaim(s *driver.Schema) (driver.Claim, error) {
	return driver.UpdateReturningClaim(s, ""), nil
}

// KeyText casts a key expression to TEXT.
func (*Dialect) KeyText(expr string) string { return "CAST(" + expr + " AS TEXT)" }

// TryLock takes key for c in the file's in-process registry (driver.LocalKeys). It is
// re-entrant: a key c holds is granted again.
func (d *Dialect) TryLock(_ context.Context, c driver.Conn, key string) (bool, error) {
	return d.keys.TryLock(c, key), nil
}

// Unlock releases key held by c.
func (d *Dialect) Unlock(_ context.Context, c driver.Conn, key string) error {
	d.keys.Unlock(c, key)
	return nil
}

// Keys is the registry the dialect's advisory keys live in.
func (d *Dialect) Keys() *driver.LocalKeys { return d.keys }
