package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/core/coretest"
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
	if c.ID == "" {
		c.ID = "id"
	}
	if c.Payload == "" {
		c.Payload = "payload"
	}
	var out []string
	for _, n := range []string{c.ID, c.Payload, c.Group, c.Attempt, c.RetryAfter, c.LockedUntil, c.ProcessedAt, c.Headers, c.CreatedAt} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// canonical is t with every name replaced by a fixed one of its own.
func canonical(t sqlqueue.Table) sqlqueue.Table {
	c := &t.Columns
	for i, col := range []*string{&c.ID, &c.Payload, &c.Group, &c.Attempt, &c.RetryAfter, &c.LockedUntil, &c.ProcessedAt, &c.Headers, &c.CreatedAt} {
		if *col != "" {
			*col = "c" + strconv.Itoa(i)
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

// FuzzTableDDL: any text the dialect quotes (PostgreSQL identifiers hold no NUL) reads back
// as itself and, spliced as a column alias, names exactly that column on the server. A table
// that validates renders DDL in which every name the table was given appears only as a quoted
// identifier (the DDL is the canonical table's with other quoted names), and PostgreSQL creates
// it, in a transaction rolled back afterwards, with exactly the columns named.
func FuzzTableDDL(f *testing.F) {
	f.Add("", "jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("s", "J$1", "ID", "body", "queue", "done", uint8(0x7f))
	f.Add("", `a"b`, "id", "payload", "", "", uint8(1))
	f.Add("", ".jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("pg_x", strings.Repeat("t", 63), "_", "a$", "b", "c", uint8(0x10))
	f.Add("public", "t", "x", "X", "", "", uint8(0))
	ctx := context.Background()
	url := coretest.PostgresURL()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		if coretest.RequireServers() {
			coretest.ServerUnavailable(f, "PostgreSQL", url, err)
		}
		f.Logf("PostgreSQL at %s unreachable (%v): checking the rendering only", url, err)
		conn = nil
	}
	var scratch string
	if conn != nil {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		scratch = "fuzz_ddl_" + hex.EncodeToString(b)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+scratch); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+scratch+" CASCADE")
			conn.Close(context.Background())
		})
	}
	d := &dialect{}
	f.Fuzz(func(t *testing.T, schema, name, id, payload, grp, processed string, drop uint8) {
		q := d.Quote(name)
		if _, idents := splitQuoted(q); !strings.ContainsRune(name, 0) && (len(idents) != 1 || idents[0] != name) {
			t.Fatalf("Quote(%q) = %s reads back as %q", name, q, idents)
		}
		if conn != nil && name != "" && len(name) <= maxIdent && utf8.ValidString(name) && !strings.ContainsRune(name, 0) {
			rows, err := conn.Query(ctx, "SELECT 1 AS "+q)
			if err != nil {
				t.Fatalf("SELECT 1 AS %s: %v", q, err)
			}
			fields := rows.FieldDescriptions()
			rows.Close()
			if len(fields) != 1 || fields[0].Name != name {
				t.Fatalf("SELECT 1 AS %s names the columns %+v, want %q", q, fields, name)
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
		index := tb.Name + "_ready"
		if len(index) > maxIdent {
			index = index[:maxIdent]
		}
		allowed := append(columnNames(tb), tb.Schema, tb.Name, index)
		for _, n := range idents {
			if !slices.Contains(allowed, n) {
				t.Fatalf("DDL of %+v quotes %q, which is none of its names", tb, n)
			}
		}
		if conn != nil {
			createOnServer(t, conn, scratch, tb, ddl)
		}
	})
}

// createOnServer runs ddl in a transaction it rolls back, and checks the table's columns. A
// table in a schema of its own gets that schema created first (a schema that exists already,
// public say, is left alone: the check is skipped).
func createOnServer(t *testing.T, conn *pgx.Conn, scratch string, tb sqlqueue.Table, ddl string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	schema := scratch
	if tb.Schema != "" {
		if strings.HasPrefix(tb.Schema, "pg_") {
			// PostgreSQL reserves pg_ schema names and refuses to create one with a clear
			// error; TableDDL leaves that refusal to the server.
			return
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{tb.Schema}.Sanitize()); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42P06" { // duplicate_schema
				return
			}
			t.Fatalf("CREATE SCHEMA %q: %v", tb.Schema, err)
		}
		schema = tb.Schema
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+scratch); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, ddl); err != nil {
		t.Fatalf("PostgreSQL refuses the DDL of %+v: %v\n%s", tb, err, ddl)
	}
	rows, err := tx.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, schema, tb.Name)
	if err != nil {
		t.Fatal(err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(have, columnNames(tb)) {
		t.Fatalf("PostgreSQL created %s.%s with columns %q, want %q", schema, tb.Name, have, columnNames(tb))
	}
}

// FuzzServerVersion: any server_version_num is spelled without a panic; a non-negative one is
// spelled as PostgreSQL spells it (major.minor from 10 on, major.minor.patch before), which
// reads back as the same number; checkVersion accepts exactly the versions from
// MinServerVersion on and names the version it refuses.
func FuzzServerVersion(f *testing.F) {
	for _, v := range []int{150020, 110000, 109999, 100000, 96024, 90600, 0, -1, 1 << 40, -(1 << 62)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int) {
		s := versionString(v)
		err := checkVersion(v)
		if (err == nil) != (v >= MinServerVersion) {
			t.Fatalf("checkVersion(%d) = %v", v, err)
		}
		if err != nil && !strings.Contains(err.Error(), s) {
			t.Fatalf("checkVersion(%d) = %q does not name version %s", v, err, s)
		}
		if v < 0 {
			return
		}
		parts := strings.Split(s, ".")
		n := make([]int, len(parts))
		for i, p := range parts {
			var perr error
			if n[i], perr = strconv.Atoi(p); perr != nil {
				t.Fatalf("versionString(%d) = %q", v, s)
			}
		}
		var back int
		switch {
		case v >= 100000 && len(n) == 2:
			back = n[0]*10000 + n[1]
		case v < 100000 && len(n) == 3:
			back = n[0]*10000 + n[1]*100 + n[2]
		default:
			t.Fatalf("versionString(%d) = %q", v, s)
		}
		if back != v {
			t.Fatalf("versionString(%d) = %q, which is server_version_num %d", v, s, back)
		}
	})
}
