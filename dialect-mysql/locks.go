package mysql

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Advisory lock names. GET_LOCK names are server-wide, so the name carries the database:
// two services on one server, each with its own database and queue table, never serialise
// each other. MySQL refuses names longer than 64 characters; a longer name is replaced by a
// deterministic digest of it, computed the same way in Go (lockName) and in SQL
// (lockNameSQL), so that the claim's IS_USED_LOCK filter and GET_LOCK agree on every name.
const (
	maxLockName   = 64
	lockPrefix    = "settle:"
	hashedPrefix  = "settle#"
	hashedHexRune = maxLockName - len(hashedPrefix) // 57 hex digits of SHA-256
)

// lockNamePrefix is the part of every lock name of database db before the key.
func lockNamePrefix(db string) string { return lockPrefix + db + ":" }

// lockName is the GET_LOCK name of key in the database whose prefix is prefix.
func lockName(prefix, key string) string {
	n := prefix + key
	if utf8.RuneCountInString(n) <= maxLockName {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return hashedPrefix + hex.EncodeToString(sum[:])[:hashedHexRune]
}

// lockNameSQL is the SQL expression computing lockName(prefix, key) from the SQL expression
// keyExpr (text). The prefix is spelled as a hex literal converted to utf8mb4, so that no
// database name can break out of a string literal whatever the SQL mode.
func lockNameSQL(prefix, keyExpr string) string {
	full := "CONCAT(CONVERT(X'" + strings.ToUpper(hex.EncodeToString([]byte(prefix))) + "' USING utf8mb4), " + keyExpr + ")"
	return "IF(CHAR_LENGTH(" + full + ") <= 64, " + full + ", CONCAT('" + hashedPrefix + "', LEFT(SHA2(" + full + ", 256), 57)))"
}
