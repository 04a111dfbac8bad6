package eventplugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

func init() {
	backends = append(backends, backend{name: "postgres", forms: []string{"lease", "rowlock", "advisory"}, open: openPostgres})
}

func pgURL() string {
	return coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// pgPool connects a pool whose sessions use schema (when not empty) as their search_path.
func pgPool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		t.Fatalf("SETTLE_TEST_PG_URL: %v", err)
	}
	cfg.MaxConns = 6
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		coretest.ServerUnavailable(t, "PostgreSQL", pgURL(), err)
	}
	return pool
}

// openPostgres makes a schema of its own for t (dropped afterwards) and a DB on it.
func openPostgres(t testing.TB) *database {
	admin := pgPool(t, "")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "eventplugin_test_" + hex.EncodeToString(b)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	pool := pgPool(t, schema)
	db, err := postgres.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		pool.Close()
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	forms := map[string]func(*postgres.DB, sqlqueue.Table, string) (core.Endpoint, error){
		"lease": postgres.Lease, "rowlock": postgres.RowLock, "advisory": postgres.Advisory,
	}
	return &database{
		dialect:  db.Dialect(),
		register: func(a *core.App) { a.Register(db) },
		endpoint: func(form string, tb sqlqueue.Table) (core.Endpoint, error) { return forms[form](db, tb, "") },
		ddl: func(tb sqlqueue.Table) string {
			ddl, err := postgres.TableDDL(tb)
			if err != nil {
				t.Fatal(err)
			}
			return ddl
		},
		exec: func(t testing.TB, sql string, args ...any) {
			t.Helper()
			if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		},
		count: func(t testing.TB, sql string, args ...any) int {
			t.Helper()
			var n int
			if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			return n
		},
		retryAfter: func(t testing.TB, table string, id int64) time.Time {
			t.Helper()
			var at time.Time
			if err := pool.QueryRow(context.Background(), "SELECT retry_after FROM "+pgx.Identifier{table}.Sanitize()+" WHERE id = $1", id).Scan(&at); err != nil {
				t.Fatal(err)
			}
			return at
		},
	}
}
