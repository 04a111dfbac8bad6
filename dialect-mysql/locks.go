package mysql

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Advisory lock names. GET_LOCK names are server-wide, so the name carries the table's
// database: the engine's key starts with the table as the catalogue identifies it (database,
// name; CanonicalTable), so two services on one server, each with its own database and queue
// table, never serialise each other, and two spellings of one table (db.jobs, and jobs from a
// connection whose current database is db) share every name. MySQL refuses names longer than
// 64 characters; a longer name is replaced by a deterministic digest of it, computed the same
// way in Go (lockName) and in SQL (lockNameSQL), so that the claim's IS_USED_LOCK filter and
// GET_LOCK agree on every name.
const (
	maxLockName   = 64
	lockPrefix    = "settle:"
	hashedPrefix  = "settle#"
	hashedHexRune = maxLockName - len(hashedPrefix) // 57 hex digits of SHA-256
)

// lockName is the GET_LOCK name of the engine's key.
func lockName(key string) string {
	n := lockPrefix + key
	if utf8.RuneCountInString(n) <= maxLockName {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return hashedPrefix + hex.EncodeToString(sum[:])[:hashedHexRune]
}

// lockNameSQL is the SQL expression computing lockName(prefix + key) from the SQL expression
// keyExpr (text). The prefix is spelled as a hex literal converted to utf8mb4, so that no
// database name can break out of a string literal whatever the SQL mode.
func lockNameSQL(prefix, keyExpr string) string {
	full := "CONCAT(CONVERT(X'" + strings.ToUpper(hex.EncodeToString([]byte(lockPrefix+prefix))) + "' USING utf8mb4), " + keyExpr + ")"
	return "IF(CHAR_LENGTH(" + full + ") <= 64, " + full + ", CONCAT('" + hashedPrefix + "', LEFT(SHA2(" + full + ", 256), 57)))"
}
