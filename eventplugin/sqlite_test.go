package eventplugin

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

func init() {
	backends = append(backends, backend{name: "sqlite", forms: []string{"lease", "advisory"}, open: openSQLite})
}

// openSQLite opens a fresh database file in t's temp dir.
func openSQLite(t testing.TB) *database {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pool := db.Pool()
	forms := map[string]func(*sqlite.DB, sqlqueue.Table, string) (core.Endpoint, error){
		"lease": sqlite.Lease, "advisory": sqlite.Advisory,
	}
	return &database{
		dialect:  db.Dialect(),
		register: func(a *core.App) { a.Register(db) },
		endpoint: func(form string, tb sqlqueue.Table) (core.Endpoint, error) { return forms[form](db, tb, "") },
		ddl: func(tb sqlqueue.Table) string {
			ddl, err := sqlite.TableDDL(tb)
			if err != nil {
				t.Fatal(err)
			}
			return ddl
		},
		exec:  sqlExec(pool),
		count: sqlCount(pool),
		retryAfter: func(t testing.TB, table string, id int64) time.Time {
			t.Helper()
			var s string
			if err := pool.QueryRowContext(context.Background(), `SELECT retry_after FROM "`+table+`" WHERE id = ?`, id).Scan(&s); err != nil {
				t.Fatal(err)
			}
			at, err := sqlite.ParseTime(s)
			if err != nil {
				t.Fatal(err)
			}
			return at
		},
	}
}

// sqlExec and sqlCount are a database's exec and count over a database/sql pool.
func sqlExec(pool *sql.DB) func(t testing.TB, stmt string, args ...any) {
	return func(t testing.TB, stmt string, args ...any) {
		t.Helper()
		if _, err := pool.ExecContext(context.Background(), stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func sqlCount(pool *sql.DB) func(t testing.TB, stmt string, args ...any) int {
	return func(t testing.TB, stmt string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRowContext(context.Background(), stmt, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		return n
	}
}
