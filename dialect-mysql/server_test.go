package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core/coretest"
)

// Test servers: MariaDB is required (CI starts one); MySQL 8 runs the same tests when
// SETTLE_TEST_MYSQL_URL names one.
const (
	mariadbEnv = coretest.MariaDBEnv
	mysqlEnv   = coretest.MySQLEnv
)

// testServer is one server the tests run on.
type testServer struct {
	name string // "mariadb", "mysql"
	dsn  string
}

// mariadbServer returns the MariaDB test server, or skips (fails under SETTLE_REQUIRE_SERVERS=1)
// when it is unreachable.
func mariadbServer(t testing.TB) testServer {
	t.Helper()
	s := testServer{name: "mariadb", dsn: coretest.MariaDBDSN()}
	s.ping(t, "MariaDB")
	return s
}

// mysqlServer returns the MySQL 8 test server named by SETTLE_TEST_MYSQL_URL, or skips.
func mysqlServer(t testing.TB) testServer {
	t.Helper()
	dsn := os.Getenv(mysqlEnv)
	if dsn == "" {
		// Not a failure even under SETTLE_REQUIRE_SERVERS=1: no MySQL 8 server is installed in
		// CI. The MySQL flavour's statement set still runs, against MariaDB, in the
		// ...MySQLFlavourOnMariaDB tests.
		t.Skipf("%s is not set: no MySQL 8 server to run on (not required, even under SETTLE_REQUIRE_SERVERS=1; the MySQL flavour's statements run against MariaDB in the MySQLFlavourOnMariaDB tests)", mysqlEnv)
	}
	s := testServer{name: "mysql", dsn: dsn}
	s.ping(t, "MySQL")
	return s
}

func (s testServer) ping(t testing.TB, what string) {
	t.Helper()
	cfg, err := driver.ParseDSN(s.dsn)
	if err != nil {
		t.Fatalf("%s DSN %q: %v", what, s.dsn, err)
	}
	db, err := sql.Open("mysql", s.dsn)
	if err != nil {
		t.Fatalf("%s DSN %q: %v", what, s.dsn, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		coretest.ServerUnavailable(t, what, cfg.Addr, err)
	}
}

// freshDatabase creates a database of its own for t on s and returns a DSN for it (parseTime
// on, UTC); the database is dropped when t ends.
func (s testServer) freshDatabase(t testing.TB) (dsn, name string) {
	t.Helper()
	cfg, err := driver.ParseDSN(s.dsn)
	if err != nil {
		t.Fatalf("DSN %q: %v", s.dsn, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "settle_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("mysql", s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN(), name
}

// openFresh opens a *sql.DB on a fresh database of s, closed when t ends.
func (s testServer) openFresh(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dsn, name := s.freshDatabase(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, name
}

// servers runs f once per available test server: MariaDB always, MySQL 8 when configured.
func servers(t *testing.T, f func(t *testing.T, s testServer)) {
	t.Run("mariadb", func(t *testing.T) { f(t, mariadbServer(t)) })
	t.Run("mysql", func(t *testing.T) { f(t, mysqlServer(t)) })
}
