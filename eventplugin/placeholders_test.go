package eventplugin

import (
	"errors"
	"testing"
)

// placeholderCase is one statement and what its server counts; err means the text is refused
// before it reaches the server.
type placeholderCase struct {
	g    grammar
	sql  string
	want int
	err  bool
}

// placeholderCases are the lexer's cases, the inputs issue 24 reported among them; the fuzz
// targets take them as seeds and check them against the real servers.
var placeholderCases = []placeholderCase{
	// SQLite.
	{grammarSQLite, "DELETE FROM t WHERE id = ? AND locked_until = ?", 2, false},
	{grammarSQLite, "SELECT '?', \"?\", `?`, [?] FROM t WHERE a = ?", 1, false},
	{grammarSQLite, "SELECT [a?b], [?]] FROM t WHERE x = ?", 1, false},
	{grammarSQLite, "SELECT 'it''s ?', ?", 1, false},
	{grammarSQLite, `SELECT 'a\', ?`, 1, false}, // a backslash is a backslash
	{grammarSQLite, "SELECT 1 -- ?\n, ? /* ? */", 1, false},
	{grammarSQLite, "SELECT ? /* runs to the end ?", 1, false},
	{grammarSQLite, "SELECT ?5", 5, false},
	{grammarSQLite, "SELECT ?2, ?", 3, false},
	{grammarSQLite, "SELECT :a, :a, @b, $c, #d", 4, false},
	{grammarSQLite, "SELECT :a, ?1", 1, false},
	{grammarSQLite, "SELECT $a::b(c d)", 0, false},
	{grammarSQLite, "SELECT $a::b(c), ?", 2, false},
	{grammarSQLite, "SELECT a$1, ? FROM t", 1, false},
	{grammarSQLite, "SELECT ?; SELECT ?, ?1", 2, false},
	{grammarSQLite, "SELECT ?; SELECT ?, ?", 3, false},
	{grammarSQLite, "SELECT ?1, ?1, ?", 2, false},
	{grammarSQLite, "SELECT :a, ?, :a", 2, false},
	{grammarSQLite, "SELECT ?3, :a", 4, false},
	{grammarSQLite, "SELECT @a, @A", 2, false},
	{grammarSQLite, "SELECT x'0a', ?", 1, false},
	{grammarSQLite, "SELECT \xEF\xBB\xBF?", 1, false},
	{grammarSQLite, "SELECT ?0", 0, true},
	{grammarSQLite, "SELECT ?32767", 0, true},
	{grammarSQLite, "SELECT ?18446744073709551617", 0, true},
	{grammarSQLite, "SELECT 'abc", 0, true},
	{grammarSQLite, "SELECT [abc", 0, true},
	{grammarSQLite, "SELECT ?\x00?", 0, true},

	// PostgreSQL.
	{grammarPostgres, "SELECT $1::int WHERE $2::int = $2", 2, false},
	{grammarPostgres, "SELECT '$3', $$ body $9 $$, $tag$ $7 $tag$, $1::int", 1, false},
	{grammarPostgres, "SELECT $a$ $b$ $2 $a$, $1::int", 1, false},
	{grammarPostgres, `SELECT E'\'' || $1::text`, 1, false},
	{grammarPostgres, `SELECT e'\' $2 ', $1::int`, 1, false},
	{grammarPostgres, `SELECT '\', $1::int`, 1, false}, // standard conforming: '\' is a string
	{grammarPostgres, "SELECT E'a'\n'\\' $2', $1::int", 1, false},
	{grammarPostgres, "SELECT 'a' -- $2\n, $1::int", 1, false},
	{grammarPostgres, "SELECT $1::int --\r, $2::int", 2, false},
	{grammarPostgres, "SELECT /* /* */ $2 */ $1::int", 1, false},
	{grammarPostgres, "SELECT a$1 FROM (SELECT 1 AS a$1) s", 0, false},
	{grammarPostgres, "SELECT $1::jsonb ? 'key'", 1, false},
	{grammarPostgres, `SELECT "a""$2", $1::int FROM (SELECT 1 AS "a""$2") s`, 1, false},
	{grammarPostgres, "SELECT $1::int --at the end", 1, false},
	{grammarPostgres, "SELECT 'a'\n'$2', $1::int", 1, false},
	{grammarPostgres, "SELECT 'a' -- c\n  'b\\' , $1::int", 1, false},
	{grammarPostgres, "SELECT U&'\\0041', B'01', X'AF', N'x', $1::int", 1, false},
	{grammarPostgres, "SELECT $1::int /* a /* b */ c $3 */", 1, false},
	{grammarPostgres, "SELECT $18446744073709551617", 0, true},
	{grammarPostgres, "SELECT $0", 0, true},
	{grammarPostgres, "SELECT $65536::int", 0, true},
	{grammarPostgres, "SELECT $1abc", 0, true},
	{grammarPostgres, "SELECT /* /* */ $1", 0, true},
	{grammarPostgres, "SELECT $$ $1", 0, true},
	{grammarPostgres, "SELECT E'\\'", 0, true},

	// MySQL / MariaDB.
	{grammarMariaDB, "SELECT 1 # ?\nFROM dual WHERE 1 = ?", 1, false},
	{grammarMariaDB, "SELECT ?--?", 2, false},
	{grammarMariaDB, "SELECT ? -- ?", 1, false},
	{grammarMariaDB, "SELECT ? --\t?", 1, false},
	{grammarMariaDB, "SELECT ?--", 1, false},
	{grammarMariaDB, `SELECT 'a\' ? ', ?`, 1, false},
	{grammarMariaDB, "SELECT \"?\", `?`, `a``?`, ? FROM (SELECT 1 AS `?`, 2 AS `a``?`) s", 1, false},
	{grammarMariaDB, "SELECT 1 /*! + ? */", 1, false},
	{grammarMariaDB, "SELECT 1 /*M! + ? */", 1, false},
	{grammarMySQL, "SELECT 1 /*M! + ? */", 0, false},
	{grammarMariaDB, "SELECT 1 /*!99999 + 2 */, ?", 1, false},
	{grammarMariaDB, "SELECT ? /* ? */", 1, false},
	{grammarMariaDB, "SELECT ? /*! + 1 /* ? */ */, ?", 2, false},
	{grammarMariaDB, "SELECT ? /*!50000 + 1 */", 1, false},
	{grammarMariaDB, "SELECT 1 -- \r?", 0, false},
	{grammarMariaDB, "SELECT 1 --\x7f?", 0, false},
	{grammarMariaDB, "SELECT 1 /*!50000 + ? */", 0, true},
	{grammarMariaDB, "SELECT 1 /*!99999 '*/' */, ?", 0, true},
	{grammarMariaDB, "/*!70000\"*/", 0, true},
	{grammarMariaDB, "/*!/*!*/", 0, false},
	{grammarMariaDB, "SELECT 1 /*! + ? /*M! + ? */, ?", 3, false},
	{grammarMySQL, "SELECT 1 /*! + ? /*M! + ? */, ?", 0, true},
	{grammarMariaDB, "SELECT 1 /*! + ? /*!50000 + 1 */", 0, true},
	{grammarMariaDB, "SELECT 1 /*!70000 'a */", 0, true},
	{grammarMariaDB, "SELECT ? /* x", 0, true},
	{grammarMariaDB, "SELECT 'abc", 0, true},
}

func TestCountPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range placeholderCases {
		got, err := c.g.count(c.sql)
		switch {
		case c.err && err == nil:
			t.Errorf("%s: count(%q) = %d, want an error", c.g, c.sql, got)
		case !c.err && err != nil:
			t.Errorf("%s: count(%q): %v, want %d", c.g, c.sql, err, c.want)
		case !c.err && got != c.want:
			t.Errorf("%s: count(%q) = %d, want %d", c.g, c.sql, got, c.want)
		}
	}
}

func TestCheckRefusesUnreadableStatement(t *testing.T) {
	t.Parallel()
	r := &Request{Event: EventAck, Dialect: "postgres", Placeholders: PlaceholdersDollar}
	err := check(r, EventAck, []Statement{{SQL: "DELETE FROM t WHERE id = $18446744073709551617", Args: []any{1}}})
	if !errors.Is(err, ErrBadStatement) {
		t.Fatalf("check: %v, want ErrBadStatement", err)
	}
	r = &Request{Event: EventAck, Dialect: "mariadb", Placeholders: PlaceholdersQuestion}
	err = check(r, EventAck, []Statement{{SQL: "DELETE FROM t # where id = ?\nWHERE id = ?", Args: []any{1}}})
	if err != nil {
		t.Fatalf("check of a statement with a # comment: %v", err)
	}
}

// TestGrammarFromFamilyOrPlaceholders: a request's dialect is the declared family of SQL
// (sqlqueue.FamilyOf); a dialect that declares none ("") is read by its placeholders.
func TestGrammarFromFamilyOrPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		family string
		p      Placeholders
		want   grammar
	}{
		{"sqlite", PlaceholdersQuestion, grammarSQLite},
		{"postgres", PlaceholdersDollar, grammarPostgres},
		{"mysql", PlaceholdersQuestion, grammarMySQL},
		{"mariadb", PlaceholdersQuestion, grammarMariaDB},
		{"", PlaceholdersQuestion, grammarSQLite},
		{"", PlaceholdersDollar, grammarPostgres},
		{"duckdb", PlaceholdersDollar, grammarPostgres},
	} {
		if g := grammarOf(c.family, c.p); g != c.want {
			t.Errorf("grammarOf(%q, %v) = %s, want %s", c.family, c.p, g, c.want)
		}
	}
}
