package mysql

import (
	"strings"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// maxIdent is the longest identifier (table, column, database name) MySQL and MariaDB accept.
const maxIdent = 64

// MaxIdentifier is MySQL's and MariaDB's identifier limit, 64 characters: the engine refuses
// longer names.
func (*dialect) MaxIdentifier() int { return maxIdent }

var _ driver.IdentifierLimit = (*dialect)(nil)

// quote quotes an identifier with backticks, doubling any backtick inside (the engine admits
// none, but quoting must be correct on its own).
func quote(ident string) string {
	return "`" + strings.ReplaceAll(ident, "`", "``") + "`"
}
