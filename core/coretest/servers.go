package coretest

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// RequireServers reports whether SETTLE_REQUIRE_SERVERS=1 is set (as .ci/run sets it): a test
// that needs an unreachable server then fails instead of skipping.
func RequireServers() bool { return os.Getenv("SETTLE_REQUIRE_SERVERS") == "1" }

// ServerUnavailable skips t because the server it needs (what, at addr: the address the test
// actually tried, as it was configured) cannot be reached, with err as the reason; under
// SETTLE_REQUIRE_SERVERS=1 it fails t instead. A password in a URL addr is shown as "xxxxx".
func ServerUnavailable(t testing.TB, what, addr string, err error) {
	t.Helper()
	addr = redact(addr)
	if RequireServers() {
		t.Fatalf("%s at %s is required (SETTLE_REQUIRE_SERVERS=1) but unreachable: %v", what, addr, err)
	}
	t.Skipf("%s at %s unreachable, skipping (set the address with its SETTLE_TEST_* variable): %v", what, addr, err)
}

// Env returns the environment variable key, or def when it is unset or empty.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// redact hides the password of the URL that starts addr (what follows a space, such as the
// variable that set it, is kept).
func redact(addr string) string {
	head, tail, _ := strings.Cut(addr, " ")
	u, err := url.Parse(head)
	if err != nil || u.User == nil {
		return addr
	}
	if _, ok := u.User.Password(); !ok {
		return addr
	}
	if tail != "" {
		return u.Redacted() + " " + tail
	}
	return u.Redacted()
}

// The test servers' addresses: each from its environment variable, or the local default
// ci/services.sh starts. Every module's tests take them from here.
const (
	// PostgresEnv names the PostgreSQL the tests use (a pgx URL).
	PostgresEnv     = "SETTLE_TEST_PG_URL"
	postgresDefault = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	// MariaDBEnv names the MariaDB the tests use (a go-sql-driver/mysql DSN).
	MariaDBEnv     = "SETTLE_TEST_MARIADB_URL"
	mariadbDefault = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
	// MySQLEnv names a MySQL 8 server to run the MySQL tests on; none by default.
	MySQLEnv = "SETTLE_TEST_MYSQL_URL"
)

// PostgresURL is the PostgreSQL the tests use: SETTLE_TEST_PG_URL, or the local server.
func PostgresURL() string { return Env(PostgresEnv, postgresDefault) }

// MariaDBDSN is the MariaDB the tests use: SETTLE_TEST_MARIADB_URL, or the local server.
func MariaDBDSN() string { return Env(MariaDBEnv, mariadbDefault) }
