package mysql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxIdent is the longest identifier (table, column, database name) MySQL and MariaDB accept.
const maxIdent = 64

// checkIdent refuses an identifier the server would refuse or settle cannot quote safely: empty,
// longer than 64 characters, or holding anything but letters, digits, _ and $.
func checkIdent(what, ident string) error {
	if ident == "" {
		return fmt.Errorf("mysql: %s is empty", what)
	}
	if n := utf8.RuneCountInString(ident); n > maxIdent {
		return fmt.Errorf("mysql: invalid %s %q: it is %d characters long; MySQL and MariaDB allow at most %d", what, ident, n, maxIdent)
	}
	for _, r := range ident {
		if !(r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("mysql: invalid %s %q: it holds %q; identifiers may hold only letters, digits, _ and $", what, ident, r)
		}
	}
	return nil
}

// quote quotes an identifier with backticks, doubling any backtick inside (checkIdent admits
// none, but quoting must be correct on its own).
func quote(ident string) string {
	return "`" + strings.ReplaceAll(ident, "`", "``") + "`"
}
