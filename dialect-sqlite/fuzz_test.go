package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/settlehq/settle/core/sqlqueue"
)

// fuzzTable builds a queue table from fuzzed names: StandardTable's columns with id, payload,
// grp and processed_at renamed and the optional columns whose bit is set in drop left out.
func fuzzTable(schema, name, id, payload, grp, processed string, drop uint8) sqlqueue.Table {
	t := sqlqueue.StandardTable(name)
	t.Schema = schema
	c := &t.Columns
	c.ID, c.Payload, c.Group, c.ProcessedAt = id, payload, grp, processed
	for i, col := range []*string{&c.Group, &c.Attempt, &c.RetryAfter, &c.LockedUntil, &c.ProcessedAt, &c.Headers, &c.CreatedAt} {
		if drop&(1<<i) != 0 {
			*col = ""
		}
	}
	return t
}

// columnNames lists the columns t names, in the order the DDL declares them.
func columnNames(t sqlqueue.Table) []string {
	c := t.Columns
	var out []string
	for _, n := range []string{c.ID, c.Payload, c.Group, c.Attempt, c.RetryAfter, c.LockedUntil, c.ProcessedAt, c.Headers, c.CreatedAt} {
		if n != "" {
			out = append(out, n)
		}
	}
	if c.ID == "" {
		out = append([]string{"id"}, out...)
	}
	if c.Payload == "" {
		out = slices.Insert(out, 1, "payload")
	}
	return out
}

// canonical is t with every name replaced by a fixed one of its own.
func canonical(t sqlqueue.Table) sqlqueue.Table {
	names := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	c := &t.Columns
	for i, col := range []*string{&c.ID, &c.Payload, &c.Group, &c.Attempt, &c.RetryAfter, &c.LockedUntil, &c.ProcessedAt, &c.Headers, &c.CreatedAt} {
		if *col != "" {
			*col = names[i]
		}
	}
	if t.Schema != "" {
		t.Schema = "s0"
	}
	t.Name = "t0"
	return t
}

// splitQuoted returns ddl with every "…" identifier replaced by Q, and the identifiers
// unquoted.
func splitQuoted(ddl string) (string, []string) {
	var b strings.Builder
	var idents []string
	for i := 0; i < len(ddl); i++ {
		if ddl[i] != '"' {
			b.WriteByte(ddl[i])
			continue
		}
		var id strings.Builder
		for i++; i < len(ddl); i++ {
			if ddl[i] == '"' {
				if i+1 < len(ddl) && ddl[i+1] == '"' {
					id.WriteByte('"')
					i++
					continue
				}
				break
			}
			id.WriteByte(ddl[i])
		}
		b.WriteByte('Q')
		idents = append(idents, id.String())
	}
	return b.String(), idents
}

// FuzzTableDDL: any text quoted by the dialect reads back as itself and, spliced as a
// column alias, names exactly that column on SQLite. A table that validates renders DDL in
// which every name the table was given appears only as a quoted identifier (the DDL is the
// canonical table's with other quoted names), and SQLite creates it with exactly the columns
// named.
func FuzzTableDDL(f *testing.F) {
	f.Add("", "jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("main", "j$1", "ID", "body", "queue", "done", uint8(0x7f))
	f.Add("", "a\"b", "id", "payload", "", "", uint8(1))
	f.Add("", ".jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("", "sqlite_x", "_", "a$", "b", "c", uint8(0x10))
	f.Add("", "t", "x", "X", "", "", uint8(0))
	db, err := sql.Open("sqlite3", "file::memory:")
	if err != nil {
		f.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	f.Cleanup(func() { db.Close() })
	d := newDialect(nil)
	f.Fuzz(func(t *testing.T, schema, name, id, payload, grp, processed string, drop uint8) {
		ctx := context.Background()
		q := d.Quote(name)
		if _, idents := splitQuoted(q); len(idents) != 1 || idents[0] != name {
			t.Fatalf("Quote(%q) = %s reads back as %q", name, q, idents)
		}
		if utf8.ValidString(name) && !strings.ContainsRune(name, 0) {
			rows, err := db.QueryContext(ctx, "SELECT 1 AS "+q)
			if err != nil {
				t.Fatalf("SELECT 1 AS %s: %v", q, err)
			}
			cols, err := rows.Columns()
			rows.Close()
			if err != nil || len(cols) != 1 || cols[0] != name {
				t.Fatalf("SELECT 1 AS %s names the columns %q (%v), want %q", q, cols, err, name)
			}
		}

		tb := fuzzTable(schema, name, id, payload, grp, processed, drop)
		ddl, err := TableDDL(tb)
		if err != nil {
			return
		}
		want, err := TableDDL(canonical(tb))
		if err != nil {
			t.Fatalf("the canonical table of an accepted one is refused: %v", err)
		}
		got, idents := splitQuoted(ddl)
		if tmpl, _ := splitQuoted(want); got != tmpl {
			t.Fatalf("DDL of %+v:\n%s\nis not the canonical DDL with other quoted names:\n%s", tb, ddl, want)
		}
		allowed := append(columnNames(tb), tb.Schema, tb.Name, tb.Name+"_ready")
		for _, n := range idents {
			if !slices.Contains(allowed, n) {
				t.Fatalf("DDL of %+v quotes %q, which is none of its names", tb, n)
			}
		}

		if lower := strings.ToLower(tb.Name); tb.Schema != "" || strings.HasPrefix(lower, "sqlite_") || lower == "sqlite" {
			// An attached schema is the application's to attach. SQLite reserves sqlite_ names
			// and refuses to create one with a clear error ("object name reserved for internal
			// use"); TableDDL leaves that refusal to SQLite, also for a table named "sqlite",
			// whose index TableDDL names sqlite_ready (a finding of this target, reported).
			return
		}
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("SQLite refuses the DDL of %+v: %v\n%s", tb, err, ddl)
		}
		defer db.ExecContext(ctx, "DROP TABLE "+d.Quote(tb.Name))
		rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var have []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			have = append(have, n)
		}
		if !slices.Equal(have, columnNames(tb)) {
			t.Fatalf("SQLite created %s with columns %q, want %q", tb.Name, have, columnNames(tb))
		}
	})
}
