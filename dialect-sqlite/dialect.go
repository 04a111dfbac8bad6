package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// dialect spells SQL for SQLite. It supports the lease and advisory forms.
type dialect struct {
	keys *driver.LocalKeys // advisory keys: per database file, in this process
}

var (
	_ driver.LeaseDialect     = (*dialect)(nil)
	_ driver.AdvisoryDialect  = (*dialect)(nil)
	_ driver.TableIdentity    = (*dialect)(nil)
	_ driver.SQLFamily        = (*dialect)(nil)
	_ driver.SingleWriter     = (*dialect)(nil)
	_ driver.DriverOwnedBytes = (*dialect)(nil)
	_ driver.DDLTypes         = (*dialect)(nil)
)

// Family is sqlqueue.FamilySQLite.
func (*dialect) Family() sqlqueue.Family { return sqlqueue.FamilySQLite }

// SingleWriter is true: a write transaction holds the whole file.
func (*dialect) SingleWriter() bool { return true }

// DriverOwnedBytes is true: mattn/go-sqlite3 copies every BLOB it reads into a slice of its own
// (C.GoBytes), which the engine may keep without copying it again.
func (*dialect) DriverOwnedBytes() bool { return true }

// DDLTypes are SQLite's column types (times are TEXT in TimeFormat).
func (*dialect) DDLTypes() driver.Types {
	return driver.Types{ID: "INTEGER PRIMARY KEY AUTOINCREMENT", Integer: "INTEGER", Text: "TEXT", Bytes: "BLOB", JSON: "TEXT", Time: "TEXT"}
}

// TimeFormat is how times are stored: UTC, microseconds, fixed width, so text order is time order.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Name is "sqlite".
func (*dialect) Name() string { return "sqlite" }

// Quote double-quotes an identifier.
func (*dialect) Quote(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

// Placeholder is "?".
func (*dialect) Placeholder(int) string { return "?" }

// Time formats t as TimeFormat text.
func (*dialect) Time(t time.Time) any { return t.UTC().Format(TimeFormat) }

// ParseTime reads a time stored by Time.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// Returning is true: SQLite ≥ 3.35 has RETURNING.
func (*dialect) Returning() bool { return true }

// Columns reads pragma_table_info.
func (*dialect) Columns(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) ([]driver.ColumnInfo, error) {
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
		c.Kind = kind(c.Type)
		out = append(out, c)
	}
	return out, rows.Err()
}

// CanonicalTable returns t as the database file lists it (pragma_table_list): schema "main"
// when t names none, and both names as they were created, since SQLite compares identifiers
// without regard to ASCII case (jobs, JOBS and main.Jobs are one table).
func (*dialect) CanonicalTable(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) (sqlqueue.TableRef, error) {
	schema := t.Schema
	if schema == "" {
		schema = "main"
	}
	rows, err := q.Query(ctx, "SELECT schema, name FROM pragma_table_list WHERE schema = ? COLLATE NOCASE AND name = ? COLLATE NOCASE", schema, t.Name)
	if err != nil {
		return sqlqueue.TableRef{}, fmt.Errorf("sqlite: resolving table %s: %w", t, err)
	}
	defer rows.Close()
	var out sqlqueue.TableRef
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return out, fmt.Errorf("sqlite: resolving table %s: %w", t, err)
		}
		return out, fmt.Errorf("sqlite: table %s does not exist", t)
	}
	if err := rows.Scan(&out.Schema, &out.Name); err != nil {
		return out, fmt.Errorf("sqlite: resolving table %s: %w", t, err)
	}
	return out, rows.Close()
}

// kind follows SQLite's type affinity rules (INT first, so BIGINT is an integer), with JSON,
// date/time, boolean and floating-point names recognised.
func kind(decl string) driver.ColumnKind {
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
func (*dialect) LeaseClaim(s *driver.Schema) (driver.Claim, error) {
	return driver.UpdateReturningClaim(s, ""), nil
}

// KeyText casts a key expression to TEXT.
func (*dialect) KeyText(expr string) string { return "CAST(" + expr + " AS TEXT)" }

// TryLock takes key for c in the file's in-process registry (driver.LocalKeys). It is
// re-entrant: a key c holds is granted again.
func (d *dialect) TryLock(_ context.Context, c driver.Conn, key string) (bool, error) {
	return d.keys.TryLock(c, key), nil
}

// Unlock releases key held by c.
func (d *dialect) Unlock(_ context.Context, c driver.Conn, key string) error {
	d.keys.Unlock(c, key)
	return nil
}
