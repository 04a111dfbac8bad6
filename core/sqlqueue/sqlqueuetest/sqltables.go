package sqlqueuetest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

// SQLTables is a Fixture's own client for any dialect whose driver has a database/sql face
// (go-sqlite3, modernc.org/sqlite, go-sql-driver/mysql; pgx through stdlib.OpenDBFromPool):
// its Exec, Count and Rows are the Fixture's, so a dialect's tests need no reader of their own.
// Names are quoted with the dialect, and a table's Schema is honoured (the suite passes
// schema-qualified tables, and so must a Fixture's own Rows and Count).
type SQLTables struct {
	// DB is the pool the fixture reads and writes with.
	DB *sql.DB
	// Dialect quotes names.
	Dialect sqlqueue.Dialect
	// ParseTime reads a time the driver returns as text (SQLite keeps times as TEXT); nil reads
	// RFC 3339. Times the driver returns as time.Time are taken as they are.
	ParseTime func(string) (time.Time, error)
}

// Exec runs a statement (Fixture.Exec).
func (s SQLTables) Exec(ctx context.Context, q string, args ...any) error {
	_, err := s.DB.ExecContext(ctx, q, args...)
	return err
}

// Count returns SELECT COUNT(*) of table, "name" or "schema.name" (Fixture.Count).
func (s SQLTables) Count(ctx context.Context, table string) (int, error) {
	ref, err := sqlqueue.ParseTableRef(table)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.quoteRef(ref)).Scan(&n)
	return n, err
}

func (s SQLTables) quoteRef(r sqlqueue.TableRef) string {
	if r.Schema != "" {
		return s.Dialect.Quote(r.Schema) + "." + s.Dialect.Quote(r.Name)
	}
	return s.Dialect.Quote(r.Name)
}

// Rows reads every row of t ordered by id, a column t does not name as its zero value
// (Fixture.Rows).
func (s SQLTables) Rows(ctx context.Context, t sqlqueue.Table) ([]Row, error) {
	c := t.Columns
	if c.ID == "" {
		c.ID = "id"
	}
	if c.Payload == "" {
		c.Payload = "payload"
	}
	col := func(name, zero string) string {
		if name == "" {
			return zero
		}
		return s.Dialect.Quote(name)
	}
	q := "SELECT " + col(c.ID, "") + ", " + col(c.Payload, "") + ", " + col(c.Group, "''") + ", " + col(c.Attempt, "0") + ", " +
		col(c.RetryAfter, "NULL") + ", " + col(c.LockedUntil, "NULL") + ", " + col(c.ProcessedAt, "NULL") + ", " +
		col(c.Headers, "NULL") + ", " + col(c.LastError, "NULL") + " FROM " + s.quoteRef(t.Ref()) + " ORDER BY " + col(c.ID, "")
	rows, err := s.DB.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var times [3]any
		var headers, lastError any
		if err := rows.Scan(&r.ID, &r.Payload, &r.Group, &r.Attempt, &times[0], &times[1], &times[2], &headers, &lastError); err != nil {
			return nil, err
		}
		for i, dst := range []**time.Time{&r.RetryAfter, &r.LockedUntil, &r.ProcessedAt} {
			if *dst, err = s.timeOf(times[i]); err != nil {
				return nil, fmt.Errorf("sqlqueuetest: row %d of %s: %w", r.ID, t.Ref(), err)
			}
		}
		if r.Headers = bytesOf(headers); json.Valid(r.Headers) {
			// A JSON type may print {"k": "v"} (PostgreSQL's jsonb); the suite compares the
			// compact form.
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.Headers); err == nil {
				r.Headers = buf.Bytes()
			}
		}
		r.LastError = string(bytesOf(lastError))
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s SQLTables) timeOf(v any) (*time.Time, error) {
	var text string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case time.Time:
		return &x, nil
	case string:
		text = x
	case []byte:
		text = string(x)
	default:
		return nil, fmt.Errorf("a time column read as %T", v)
	}
	parse := s.ParseTime
	if parse == nil {
		parse = func(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
	}
	t, err := parse(text)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// bytesOf reads a text or binary column scanned into an any (nil for NULL).
func bytesOf(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return append([]byte(nil), x...)
	case string:
		return []byte(x)
	case nil:
		return nil
	}
	return []byte(fmt.Sprint(v))
}
