package eventplugin

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/core/coretest"
)

// The placeholder lexer's fuzz targets. The property of the three server targets: for any text
// the lexer accepts and the server prepares, the lexer's count is the number of arguments the
// server binds; for any text the lexer finds unreadable (errUnreadable: an unterminated
// literal or comment, a parameter the server numbers nowhere), the server refuses it too.
// FuzzPlaceholdersQuoted needs no server: any text inside each grammar's literals, quoted
// identifiers and comments holds no parameter.

// serverCount prepares sql on a real server and returns how many arguments it binds, or
// ok=false when the server refuses the text.
type serverCount func(t *testing.T, sql string) (n int, ok bool)

// fuzzAgainst seeds f with the lexer's cases for g and checks g against the server.
func fuzzAgainst(f *testing.F, g grammar, server serverCount) {
	for _, c := range placeholderCases {
		f.Add(c.sql)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		n, err := g.count(sql)
		if err != nil {
			if errors.Is(err, errUnreadable) {
				if sn, ok := server(t, sql); ok {
					t.Fatalf("%s: the lexer refuses %q (%v), the server prepares it with %d parameters", g, sql, err, sn)
				}
			}
			return
		}
		if n < 0 {
			t.Fatalf("%s: count(%q) = %d", g, sql, n)
		}
		if sn, ok := server(t, sql); ok && sn != n {
			t.Fatalf("%s: the lexer counts %d parameters in %q, the server %d", g, n, sql, sn)
		}
	})
}

// FuzzPlaceholdersSQLite checks the lexer against SQLite as mattn/go-sqlite3 (the driver of
// dialect-sqlite) runs a text: statement after statement, each binding
// sqlite3_bind_parameter_count arguments.
func FuzzPlaceholdersSQLite(f *testing.F) {
	db, err := sql.Open("sqlite3", "file::memory:")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	fuzzAgainst(f, grammarSQLite, func(t *testing.T, text string) (int, bool) {
		total, ok := 0, true
		err := conn.Raw(func(dc any) error {
			c := dc.(driver.ConnPrepareContext)
			for q := text; q != ""; {
				st, err := c.PrepareContext(context.Background(), q)
				if err != nil {
					ok = false
					return nil
				}
				total += st.NumInput()
				// The driver's Exec goes on with the statement's tail, as it keeps it.
				q = reflect.ValueOf(st).Elem().FieldByName("t").String()
				st.Close()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return total, ok
	})
}

// FuzzPlaceholdersPostgres checks the lexer against PostgreSQL: the parameter count of an
// unnamed prepared statement (Parse and Describe; nothing is executed).
func FuzzPlaceholdersPostgres(f *testing.F) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		coretest.ServerUnavailable(f, "PostgreSQL", pgURL(), err)
	}
	f.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "SET statement_timeout = '5s'"); err != nil {
		f.Fatal(err)
	}
	fuzzAgainst(f, grammarPostgres, func(t *testing.T, text string) (int, bool) {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		sd, err := conn.Prepare(pctx, "", text)
		if conn.IsClosed() {
			t.Fatalf("the connection to PostgreSQL broke preparing %q: %v", text, err)
		}
		if err != nil {
			return 0, false
		}
		return len(sd.ParamOIDs), true
	})
}

// FuzzPlaceholdersMariaDB checks the lexer against MariaDB (or MySQL): the parameter count of
// a server-side prepared statement, as go-sql-driver/mysql reports it (nothing is executed).
func FuzzPlaceholdersMariaDB(f *testing.F) {
	cfg, err := mysqldriver.ParseDSN(mariadbDSN())
	if err != nil {
		f.Fatal(err)
	}
	db, err := sql.Open("mysql", mariadbDSN())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(f, "MariaDB", cfg.Addr, err)
	}
	f.Cleanup(func() { conn.Close() })
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		f.Fatal(err)
	}
	g := grammarMySQL
	if strings.Contains(strings.ToLower(version), "mariadb") {
		g = grammarMariaDB
	}
	fuzzAgainst(f, g, func(t *testing.T, text string) (int, bool) {
		n, ok := 0, true
		err := conn.Raw(func(dc any) error {
			st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, text)
			if errors.Is(err, driver.ErrBadConn) {
				return err
			}
			if err != nil {
				ok = false
				return nil
			}
			n = st.NumInput()
			return st.Close()
		})
		if err != nil {
			t.Fatalf("the connection to %s broke preparing %q: %v", version, text, err)
		}
		return n, ok
	})
}

// FuzzPlaceholdersQuoted puts any text s inside each grammar's string literals, quoted
// identifiers and comments, quoted as that server quotes, between two parameters: the count is
// always 2. And for s itself, whatever it is: no panic, and an accepted count is bounded by
// the text (no more "?" parameters than "?" bytes; a "$n" count within the protocol's $65535).
func FuzzPlaceholdersQuoted(f *testing.F) {
	for _, s := range []string{
		"", "?", "$1", "'", "''", `\`, `\'`, "\"", "`", "]", "[", "*/", "/*", "--", "#", "\n",
		"$$", "$q$", "$q", "E'", "a'\n'b", "/*!50000 ? */", "?--?", "#?\n?", "$18446744073709551617",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, g := range []grammar{grammarSQLite, grammarPostgres, grammarMySQL, grammarMariaDB} {
			n, err := g.count(s)
			if err == nil {
				switch g {
				case grammarMySQL, grammarMariaDB:
					if q := strings.Count(s, "?"); n > q {
						t.Fatalf("%s: %d parameters in %q, which has %d '?'", g, n, s, q)
					}
				case grammarPostgres:
					if n > postgresMaxParams || (n > 0 && !strings.Contains(s, "$")) {
						t.Fatalf("%s: count %d for %q", g, n, s)
					}
				}
			}
			if strings.IndexByte(s, 0) >= 0 {
				continue
			}
			for _, text := range quotedForms(g, s) {
				n, err := g.count(text)
				if err != nil || n != 2 {
					t.Fatalf("%s: count(%q) = %d, %v; want the 2 parameters outside the quoted text", g, text, n, err)
				}
			}
		}
	})
}

// quotedForms returns texts holding s as a literal, a quoted identifier or a comment of g,
// between parameter 1 and parameter 2.
func quotedForms(g grammar, s string) []string {
	p1, p2 := "?", "?"
	if g == grammarPostgres {
		p1, p2 = "$1", "$2"
	}
	wrap := func(inner string) string { return "SELECT " + p1 + ", " + inner + "\n, " + p2 }
	double := func(q string) string { return q + strings.ReplaceAll(s, q, q+q) + q }
	var out []string
	switch g {
	case grammarSQLite:
		out = append(out, wrap(double("'")), wrap(double(`"`)), wrap(double("`")))
		if !strings.Contains(s, "]") {
			out = append(out, wrap("["+s+"]"))
		}
	case grammarPostgres:
		out = append(out, wrap(double("'")), wrap(double(`"`)))
		e := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
		out = append(out, wrap("E'"+e+"'"), wrap("e'"+e+"'"))
		if !strings.Contains(s, "$q") {
			out = append(out, wrap("$q$"+s+"$q$"))
		}
		if !strings.Contains(s, "$") {
			out = append(out, wrap("$$"+s+"$$"))
		}
	case grammarMySQL, grammarMariaDB:
		esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`, `"`, `\"`).Replace(s)
		out = append(out, wrap("'"+esc+"'"), wrap(`"`+esc+`"`), wrap(double("`")))
		if !strings.Contains(s, `\`) {
			out = append(out, wrap(double("'")))
		}
	}
	if !strings.ContainsAny(s, "\n\r") {
		switch g {
		case grammarMySQL, grammarMariaDB:
			out = append(out, wrap("-- "+s+"\n"), wrap("#"+s+"\n"))
		default:
			out = append(out, wrap("--"+s+"\n"))
		}
	}
	if !strings.Contains(s, "*/") && !strings.Contains(s, "/*") {
		out = append(out, wrap("/* "+s+" */"))
	}
	return out
}
