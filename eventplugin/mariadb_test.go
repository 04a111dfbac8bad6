package eventplugin

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
)

func init() {
	backends = append(backends, backend{name: "mariadb", forms: []string{"lease", "rowlock", "advisory"}, open: openMariaDB})
}

func mariadbDSN() string {
	return coretest.Env("SETTLE_TEST_MARIADB_URL", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
}

// openMariaDB creates a database of its own for t (dropped afterwards) and a DB on it.
func openMariaDB(t testing.TB) *database {
	cfg, err := driver.ParseDSN(mariadbDSN())
	if err != nil {
		t.Fatalf("SETTLE_TEST_MARIADB_URL %q: %v", mariadbDSN(), err)
	}
	admin, err := sql.Open("mysql", mariadbDSN())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		coretest.ServerUnavailable(t, "MariaDB", cfg.Addr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "eventplugin_t_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = name, true, time.UTC
	db, err := mysql.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	pool := db.Pool()
	t.Cleanup(func() {
		_ = db.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		admin.Close()
	})
	forms := map[string]func(*mysql.DB, sqlqueue.Table, string) (core.Endpoint, error){
		"lease": mysql.Lease, "rowlock": mysql.RowLock, "advisory": mysql.Advisory,
	}
	return &database{
		dialect:  db.Dialect(),
		register: func(a *core.App) { a.Register(db) },
		endpoint: func(form string, tb sqlqueue.Table) (core.Endpoint, error) { return forms[form](db, tb, "") },
		ddl: func(tb sqlqueue.Table) string {
			ddl, err := mysql.TableDDL(tb)
			if err != nil {
				t.Fatal(err)
			}
			return ddl
		},
		exec:  sqlExec(pool),
		count: sqlCount(pool),
		retryAfter: func(t testing.TB, table string, id int64) time.Time {
			t.Helper()
			var at time.Time
			if err := pool.QueryRowContext(context.Background(), "SELECT retry_after FROM `"+table+"` WHERE id = ?", id).Scan(&at); err != nil {
				t.Fatal(err)
			}
			return at
		},
	}
}
