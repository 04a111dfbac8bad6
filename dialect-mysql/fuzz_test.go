package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
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

// splitQuoted returns ddl with every `…` identifier replaced by Q, and the identifiers
// unquoted.
func splitQuoted(ddl string) (string, []string) {
	var b strings.Builder
	var idents []string
	for i := 0; i < len(ddl); i++ {
		if ddl[i] != '`' {
			b.WriteByte(ddl[i])
			continue
		}
		var id strings.Builder
		for i++; i < len(ddl); i++ {
			if ddl[i] == '`' {
				if i+1 < len(ddl) && ddl[i+1] == '`' {
					id.WriteByte('`')
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

// FuzzTableDDL: any text quoted with backticks reads back as itself and, spliced as a
// column alias, names exactly that column on the server. A table the dialect accepts renders
// DDL in which every name the table was given appears only as a quoted identifier (the DDL is
// the canonical table's with other quoted names), and MariaDB (or MySQL) creates it, in a
// scratch database, with exactly the columns named.
func FuzzTableDDL(f *testing.F) {
	f.Add("", "jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("s", "J$1", "ID", "body", "queue", "done", uint8(0x7f))
	f.Add("", "a`b", "id", "payload", "", "", uint8(1))
	f.Add("", ".jobs", "id", "payload", "grp", "processed_at", uint8(0))
	f.Add("", strings.Repeat("t", 63), "_", "a$", "b", "c", uint8(0x10))
	f.Add("", "t", "x", "X", "", "", uint8(0))
	ctx := context.Background()
	dsn := coretest.MariaDBDSN()
	db, scratch := scratchDatabase(f, dsn)
	d := &dialect{flavour: MySQL}
	f.Fuzz(func(t *testing.T, schema, name, id, payload, grp, processed string, drop uint8) {
		q := d.Quote(name)
		if _, idents := splitQuoted(q); len(idents) != 1 || idents[0] != name {
			t.Fatalf("Quote(%q) = %s reads back as %q", name, q, idents)
		}
		if db != nil && sqlqueue.ValidIdent(name) && driver.CheckIdentifier(d, "alias", name) == nil {
			var cols []string
			rows, err := db.QueryContext(ctx, "SELECT 1 AS "+q)
			if err == nil {
				cols, err = rows.Columns()
				rows.Close()
			}
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
		if db == nil {
			return
		}
		if tb.Schema != "" {
			// A database per input is too slow: the table goes to the scratch database, named
			// as a schema (the DDL qualifies it the same way).
			tb.Schema = scratch
			if ddl, err = TableDDL(tb); err != nil {
				t.Fatal(err)
			}
		}
		createOnServer(t, db, scratch, tb, ddl)
	})
}

// scratchDatabase connects to a database of the fuzz target's own, dropped afterwards; nil
// (checking the rendering only) when the server is unreachable and not required.
func scratchDatabase(f *testing.F, dsn string) (*sql.DB, string) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		f.Fatalf("%s %q: %v", mariadbEnv, dsn, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", dsn)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		if coretest.RequireServers() {
			coretest.ServerUnavailable(f, "MariaDB", cfg.Addr, err)
		}
		f.Logf("MariaDB at %s unreachable (%v): checking the rendering only", cfg.Addr, err)
		return nil, ""
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "fuzz_ddl_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		f.Fatal(err)
	}
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		f.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	f.Cleanup(func() {
		db.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		admin.Close()
	})
	return db, name
}

// createOnServer creates the table, checks its columns and drops it.
func createOnServer(t *testing.T, db *sql.DB, scratch string, tb sqlqueue.Table, ddl string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		t.Fatalf("the server refuses the DDL of %+v: %v\n%s", tb, err, ddl)
	}
	defer db.ExecContext(ctx, "DROP TABLE "+quote(scratch)+"."+quote(tb.Name))
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, scratch, tb.Name)
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
		t.Fatalf("the server created %s with columns %q, want %q", tb.Name, have, columnNames(tb))
	}
}

// FuzzParseVersion: any VERSION() text parses or is refused without a panic. A parsed version
// is MariaDB exactly when the text says "mariadb" (in any case), keeps the text, has
// non-negative numbers that are the text's leading major.minor[.patch], and Supported accepts
// exactly MySQL from 8.0.1 and MariaDB from 10.6.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{
		"8.0.36", "8.4.0-log", "10.11.6-MariaDB-0+deb12u1", "10.11.19-MariaDB-0+deb12u1", "5.5.5-10.11.6-MariaDB",
		"8.0.0", "8.0.1", "10.5.99-MariaDB", "10.6.0-mariadb", "8", "", "1.2.3.4", "1..2", "+8.0.1", "08.00.01",
		"99999999999999999999.0", "8.0.36-0ubuntu0.22.04.1", "١٠.٦",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		if (v.Flavour == MariaDB) != strings.Contains(strings.ToLower(s), "mariadb") || v.Raw != s {
			t.Fatalf("ParseVersion(%q) = %+v", s, v)
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("ParseVersion(%q) = %+v: a negative number", s, v)
		}
		// The numbers are the text's leading digits and dots, read as decimal.
		lead := s
		if i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
			lead = s[:i]
		}
		parts := strings.Split(lead, ".")
		nums := []int{v.Major, v.Minor, v.Patch}
		for i, p := range parts {
			if n, err := strconv.Atoi(p); err != nil || n != nums[i] {
				t.Fatalf("ParseVersion(%q) = %+v: part %d is %q", s, v, i, p)
			}
		}
		if len(parts) == 2 && v.Patch != 0 {
			t.Fatalf("ParseVersion(%q) = %+v: a patch from nowhere", s, v)
		}
		if !utf8.ValidString(v.String()) && utf8.ValidString(s) {
			t.Fatalf("Version.String of %q is not UTF-8", s)
		}
		min := Version{Major: 8, Minor: 0, Patch: 1}
		if v.Flavour == MariaDB {
			min = Version{Major: 10, Minor: 6}
		}
		older := slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{min.Major, min.Minor, min.Patch}) < 0
		if err := v.Supported(); (err == nil) == older {
			t.Fatalf("ParseVersion(%q) = %+v: Supported() = %v", s, v, err)
		}
	})
}
