package eventplugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// grammar is how one database server reads statement text, as far as finding its parameters
// goes: which characters start comments, strings and quoted identifiers, and how parameters are
// spelled and numbered. Each follows the server's own lexer (SQLite's tokenize.c, PostgreSQL's
// scan.l, MySQL's and MariaDB's sql_lex.cc), so that check counts what the server will count.
type grammar uint8

const (
	// grammarSQLite: "--" and "/* */" comments (an unterminated block comment runs to the end);
	// '' strings, "" `` and [] identifiers; parameters "?", "?NNN", ":name", "@name", "$name"
	// and "#name", numbered per statement as sqlite3_bind_parameter_count numbers them; the
	// statements of a text are run one after the other, each taking its own arguments.
	grammarSQLite grammar = iota + 1
	// grammarPostgres: "--" and nested "/* */" comments; '' strings (standard conforming),
	// E'' strings with backslash escapes, dollar-quoted strings; "" identifiers; parameters
	// "$n", the count being the highest n.
	grammarPostgres
	// grammarMySQL: "#" comments, "--" comments only before whitespace, a control character or
	// the end, "/* */" comments and "/*! */" executable comments; '' and "" strings with
	// backslash escapes (the default sql_mode: no ANSI_QUOTES, no NO_BACKSLASH_ESCAPES); ``
	// identifiers; "?" parameters.
	grammarMySQL
	// grammarMariaDB is grammarMySQL plus MariaDB's "/*M! */" executable comments.
	grammarMariaDB
)

// Limits the servers put on parameter numbers.
const (
	// sqliteMaxVariable is SQLITE_MAX_VARIABLE_NUMBER as mattn/go-sqlite3 builds SQLite.
	sqliteMaxVariable = 32766
	// postgresMaxParams is the most parameters the extended query protocol binds (an Int16).
	postgresMaxParams = 65535
	// mysqlMaxParams is the most parameters a MySQL prepared statement takes.
	mysqlMaxParams = 65535
)

// grammarOf returns the grammar of a dialect by the family of SQL it declares
// (sqlqueue.FamilyOf, which is what requests carry as their dialect), and by parameter spelling
// for a dialect of another family or of none ($n reads as PostgreSQL, ? as SQLite).
func grammarOf(dialect string, p Placeholders) grammar {
	switch {
	case dialect == "postgres" || p == PlaceholdersDollar:
		return grammarPostgres
	case dialect == "mysql":
		return grammarMySQL
	case dialect == "mariadb":
		return grammarMariaDB
	}
	return grammarSQLite
}

// String names the grammar.
func (g grammar) String() string {
	switch g {
	case grammarSQLite:
		return "sqlite"
	case grammarPostgres:
		return "postgres"
	case grammarMySQL:
		return "mysql"
	case grammarMariaDB:
		return "mariadb"
	}
	return "grammar(" + strconv.Itoa(int(g)) + ")"
}

var (
	// errNUL refuses a NUL byte: SQLite stops reading at it, the other servers refuse it, so no
	// count is right for every server.
	errNUL = errors.New("the statement holds a NUL byte")
	// errUnreadable is text the server cannot read either: an unterminated literal, identifier
	// or comment, a parameter it numbers nowhere.
	errUnreadable = errors.New("the server cannot read it")
)

// count returns how many arguments the server binds for sql: the number of parameters, or for
// "$n" and "?NNN" parameters the highest number. Text the server would refuse to read
// (an unterminated string, a parameter number out of range) is an error saying where.
func (g grammar) count(sql string) (int, error) {
	if i := strings.IndexByte(sql, 0); i >= 0 {
		return 0, fmt.Errorf("%w (byte %d)", errNUL, i)
	}
	switch g {
	case grammarSQLite:
		return countSQLite(sql)
	case grammarPostgres:
		return countPostgres(sql)
	case grammarMySQL, grammarMariaDB:
		n, _, err := countMySQL(sql, 0, false, g == grammarMariaDB)
		if err == nil && n > mysqlMaxParams {
			err = fmt.Errorf("%d parameters: a prepared statement takes at most %d", n, mysqlMaxParams)
		}
		return n, err
	}
	return 0, fmt.Errorf("eventplugin: unknown grammar %v", g)
}

// unterminated reports text that opens at sql[i] and never closes.
func unterminated(what string, i int) error {
	return fmt.Errorf("%w: unterminated %s starting at byte %d", errUnreadable, what, i)
}

// closeQuote returns the index of the quote q closing the literal or identifier opened at
// sql[i] (a doubled quote stands for itself; with backslash, a backslash escapes the next
// byte), or -1.
func closeQuote(sql string, i int, q byte, backslash bool) int {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return -1
}

// lineEnd returns the index of the first byte of sql at or after i that is one of ends, or
// len(sql).
func lineEnd(sql string, i int, ends string) int {
	if j := strings.IndexAny(sql[i:], ends); j >= 0 {
		return i + j
	}
	return len(sql)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// number reads the decimal digits sql[i:j] as a parameter number, or reports it above max.
func number(digits string, max int) (int, bool) {
	v, err := strconv.Atoi(digits)
	if err != nil || v > max {
		return 0, false
	}
	return v, true
}

// SQLite.

// sqliteIDChar is SQLite's IdChar: a byte that continues an identifier.
func sqliteIDChar(c byte) bool { return isLetter(c) || isDigit(c) || c == '_' || c == '$' || c >= 0x80 }

func sqliteSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// sqliteStatement numbers one statement's parameters as SQLite does: "?" takes the next
// number, "?NNN" the number NNN, and a name the number of its first appearance.
type sqliteStatement struct {
	n     int
	names map[string]bool
}

func (s *sqliteStatement) named(name string) {
	if s.names[name] {
		return
	}
	if s.names == nil {
		s.names = make(map[string]bool)
	}
	s.names[name] = true
	s.n++
}

func countSQLite(sql string) (int, error) {
	total := 0
	var st sqliteStatement
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = lineEnd(sql, i+2, "\n")
		case c == '/' && i+2 < len(sql) && sql[i+1] == '*':
			// A block comment without its end runs to the end of the text.
			if j := strings.Index(sql[i+2:], "*/"); j >= 0 {
				i += 2 + j + 2
			} else {
				i = len(sql)
			}
		case c == '\'' || c == '"' || c == '`':
			j := closeQuote(sql, i, c, false)
			if j < 0 {
				return 0, unterminated("quoted text", i)
			}
			i = j + 1
		case c == '[':
			j := strings.IndexByte(sql[i+1:], ']')
			if j < 0 {
				return 0, unterminated("[identifier]", i)
			}
			i += j + 2
		case c == '?':
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j == i+1 {
				st.n++
			} else {
				v, ok := number(sql[i+1:j], sqliteMaxVariable)
				if !ok || v < 1 {
					return 0, fmt.Errorf("%w: parameter %s at byte %d: SQLite numbers parameters ?1 to ?%d", errUnreadable, sql[i:j], i, sqliteMaxVariable)
				}
				st.n = max(st.n, v)
			}
			i = j
		case c == '$' || c == ':' || c == '@' || c == '#':
			j, ok := sqliteVariable(sql, i)
			if ok {
				st.named(sql[i:j])
			}
			i = j
		case c == ';':
			total += st.n
			st = sqliteStatement{}
			i++
		case c == 0xEF && strings.HasPrefix(sql[i:], "\xEF\xBB\xBF"):
			i += 3 // a byte-order mark reads as a space
		case sqliteIDChar(c):
			// An identifier, a keyword or a number: a '$' inside it starts no parameter.
			for i++; i < len(sql) && sqliteIDChar(sql[i]); i++ {
			}
		default:
			i++
		}
		if total+st.n > sqliteMaxVariable {
			return 0, fmt.Errorf("more than %d parameters", sqliteMaxVariable)
		}
	}
	return total + st.n, nil
}

// sqliteVariable reads a named parameter (":a", "@a", "$a", "#a", with Tcl's "::" and "(…)"
// suffixes) at sql[i]; it returns the end of the token and whether SQLite takes it as a
// parameter ("$" alone, or "#1", is a syntax error).
func sqliteVariable(sql string, i int) (int, bool) {
	n := 0
	j := i + 1
	for j < len(sql) {
		c := sql[j]
		switch {
		case sqliteIDChar(c):
			n++
			j++
			continue
		case c == '(' && n > 0:
			for j++; j < len(sql) && !sqliteSpace(sql[j]) && sql[j] != ')'; j++ {
			}
			if j < len(sql) && sql[j] == ')' {
				return j + 1, true
			}
			return j, false
		case c == ':' && j+1 < len(sql) && sql[j+1] == ':':
			j += 2
			continue
		}
		break
	}
	if n == 0 || (sql[i] == '#' && isDigit(sql[i+1])) {
		return j, false
	}
	return j, true
}

// PostgreSQL.

func pgIdentStart(c byte) bool { return isLetter(c) || c == '_' || c >= 0x80 }

func pgIdentCont(c byte) bool { return pgIdentStart(c) || isDigit(c) || c == '$' }

func countPostgres(sql string) (int, error) {
	n := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			i = lineEnd(sql, i+2, "\n\r")
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := pgComment(sql, i)
			if j < 0 {
				return 0, unterminated("/* comment", i)
			}
			i = j
		case c == '\'':
			j := pgString(sql, i+1, false)
			if j < 0 {
				return 0, unterminated("quoted string", i)
			}
			i = j
		case (c == 'E' || c == 'e') && i+1 < len(sql) && sql[i+1] == '\'':
			// Identifiers are read whole, so this E begins a token: an escape string.
			j := pgString(sql, i+2, true)
			if j < 0 {
				return 0, unterminated("E'' string", i)
			}
			i = j
		case c == '"':
			j := closeQuote(sql, i, '"', false)
			if j < 0 {
				return 0, unterminated("quoted identifier", i)
			}
			i = j + 1
		case c == '$':
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j > i+1 {
				if j < len(sql) && pgIdentStart(sql[j]) {
					return 0, fmt.Errorf("%w: trailing junk after parameter %s at byte %d", errUnreadable, sql[i:j+1], i)
				}
				v, ok := number(sql[i+1:j], postgresMaxParams)
				switch {
				case !ok:
					return 0, fmt.Errorf("parameter %s at byte %d: the protocol binds $1 to $%d", sql[i:j], i, postgresMaxParams)
				case v < 1:
					return 0, fmt.Errorf("%w: parameter %s at byte %d: there is no parameter $0", errUnreadable, sql[i:j], i)
				}
				n = max(n, v)
				i = j
				continue
			}
			tag, ok := dollarTag(sql, i)
			if !ok {
				i++
				continue
			}
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				return 0, unterminated("dollar-quoted string "+tag, i)
			}
			i += len(tag) + end + len(tag)
		case pgIdentStart(c):
			// An identifier or keyword, "$" included: "a$1" is one identifier.
			for i++; i < len(sql) && pgIdentCont(sql[i]); i++ {
			}
		case isDigit(c):
			// A number, with whatever junk follows it (an error of the server's), but not "$".
			for i++; i < len(sql) && (isDigit(sql[i]) || pgIdentStart(sql[i]) || sql[i] == '.'); i++ {
			}
		default:
			i++
		}
	}
	return n, nil
}

// pgComment returns the end of the /* comment opened at sql[i] (comments nest), or -1.
func pgComment(sql string, i int) int {
	depth := 0
	for j := i; j+1 < len(sql); {
		switch sql[j : j+2] {
		case "/*":
			depth++
			j += 2
		case "*/":
			depth--
			j += 2
			if depth == 0 {
				return j
			}
		default:
			j++
		}
	}
	return -1
}

// pgString returns the end of the string whose body starts at sql[j]: standard conforming
// (a backslash is a backslash) or, with escapes, an E” string. A quote followed by
// whitespace holding a newline and another quote continues the string, in the same mode.
func pgString(sql string, j int, escapes bool) int {
	for j < len(sql) {
		switch sql[j] {
		case '\\':
			if escapes {
				j += 2
				continue
			}
		case '\'':
			if j+1 < len(sql) && sql[j+1] == '\'' {
				j += 2
				continue
			}
			k := pgContinuation(sql, j+1)
			if k < 0 {
				return j + 1
			}
			j = k + 1
			continue
		}
		j++
	}
	return -1
}

// pgContinuation returns the index of the quote that continues a string closed just before
// sql[k] ({quotecontinue}: whitespace or -- comments with at least one newline, then a quote),
// or -1.
func pgContinuation(sql string, k int) int {
	newline := false
	for k < len(sql) {
		switch c := sql[k]; {
		case c == ' ' || c == '\t' || c == '\f' || (c == '\v' && newline):
			k++
		case c == '\n' || c == '\r':
			newline = true
			k++
		case c == '-' && k+1 < len(sql) && sql[k+1] == '-':
			k = lineEnd(sql, k, "\n\r")
			if k == len(sql) {
				return -1
			}
		case c == '\'' && newline:
			return k
		default:
			return -1
		}
	}
	return -1
}

// dollarTag reads a PostgreSQL dollar-quote opener ($$ or $tag$) at sql[i].
func dollarTag(sql string, i int) (string, bool) {
	for j := i + 1; j < len(sql); j++ {
		switch c := sql[j]; {
		case c == '$':
			return sql[i : j+1], true
		case !pgIdentStart(c) && !(j > i+1 && isDigit(c)):
			return "", false
		}
	}
	return "", false
}

// MySQL and MariaDB.

func mysqlIdentChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '$' || c >= 0x80
}

// mysqlDashComment: "--" starts a comment when the next byte is whitespace, a control
// character or the end of the text.
func mysqlDashComment(sql string, i int) bool {
	if i+2 >= len(sql) {
		return true
	}
	c := sql[i+2]
	return c <= ' ' || c == 0x7F
}

// countMySQL counts the parameters of sql from i. Inside an executable comment (inExec), the
// "*/" that closes it ends the count; it returns the count and where it stopped.
func countMySQL(sql string, i int, inExec, mariadb bool) (int, int, error) {
	n := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == '#':
			i = lineEnd(sql, i+1, "\n")
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-' && mysqlDashComment(sql, i):
			i = lineEnd(sql, i+2, "\n")
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			k, j, err := mysqlComment(sql, i, inExec, mariadb)
			if err != nil {
				return 0, 0, err
			}
			n += k
			i = j
		case c == '*' && inExec && i+1 < len(sql) && sql[i+1] == '/':
			return n, i + 2, nil
		case c == '\'' || c == '"' || c == '`':
			j := closeQuote(sql, i, c, c != '`')
			if j < 0 {
				return 0, 0, unterminated("quoted text", i)
			}
			i = j + 1
		case c == '?':
			n++
			i++
		case mysqlIdentChar(c):
			for i++; i < len(sql) && mysqlIdentChar(sql[i]); i++ {
			}
		default:
			i++
		}
	}
	if inExec {
		return 0, 0, unterminated("executable comment", i)
	}
	return n, i, nil
}

// mysqlComment reads the comment opened at sql[i] and returns the parameters in it (an
// executable comment's content is code) and its end. Inside an executable comment (inExec) a
// plain comment is skipped; an executable one only drops its marker: the servers keep no depth,
// the first "*/" ends every executable comment open, so the caller reads on from the returned
// position as code of the comment it is in.
func mysqlComment(sql string, i int, inExec, mariadb bool) (int, int, error) {
	body := i + 2
	exec := false
	switch {
	case strings.HasPrefix(sql[body:], "!"):
		exec, body = true, body+1
	case mariadb && strings.HasPrefix(sql[body:], "M!"):
		exec, body = true, body+2
	}
	if !exec {
		end := mysqlCommentEnd(sql, body, false)
		if end < 0 {
			return 0, 0, unterminated("/* comment", i)
		}
		return 0, end, nil
	}
	digits := body
	for digits < len(sql) && digits-body < 6 && isDigit(sql[digits]) {
		digits++
	}
	versioned := digits-body >= 5
	if inExec {
		if versioned {
			// Run, its "*/" ends the outer comment too; skipped, the outer one goes on.
			return 0, 0, fmt.Errorf("versioned comment %s at byte %d inside an executable comment: where the server ends it depends on its version", sql[i:digits], i)
		}
		return 0, body, nil
	}
	if versioned {
		body = digits
	}
	n, end, err := countMySQL(sql, body, true, mariadb)
	if err != nil && !(versioned && mysqlCommentEnd(sql, body, true) >= 0) {
		return 0, 0, err
	}
	if versioned && (err != nil || n > 0 || mysqlCommentEnd(sql, body, true) != end) {
		// Older servers (and MariaDB, for MySQL 5.7+ versions) skip the comment as a comment,
		// newer ones run it: what the server counts, and whether it can read the content at
		// all ("/*!70000 '*/" is a comment to MariaDB), depends on its version.
		return 0, 0, fmt.Errorf("versioned comment %s at byte %d: whether the server reads it as code depends on its version; keep parameters and unbalanced quotes out of it", sql[i:digits], i)
	}
	return n, end, nil
}

// mysqlCommentEnd returns the end of a comment whose body starts at sql[from] as the server's
// consume_comment reads it (the first "*/" closes it; with nested, after inner /* */
// comments, as in a skipped versioned comment), or -1.
func mysqlCommentEnd(sql string, from int, nested bool) int {
	for j := from; j+1 < len(sql); j++ {
		switch {
		case nested && sql[j] == '/' && sql[j+1] == '*':
			end := mysqlCommentEnd(sql, j+2, false)
			if end < 0 {
				return -1
			}
			j = end - 1
		case sql[j] == '*' && sql[j+1] == '/':
			return j + 2
		}
	}
	return -1
}
