package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// TestConformance runs the whole sqlqueuetest suite against the real PostgreSQL, each test on
// a schema of its own that is dropped after it.
func TestConformance(t *testing.T) {
	sqlqueuetest.Run(t, fixture)
}

// TestConformanceNotify runs the outcome cases again on a DB with Notify(true), so that every
// publish also sends pg_notify and every subscription listens.
func TestConformanceNotify(t *testing.T) {
	sqlqueuetest.RunOutcomes(t, func(t *testing.T) *sqlqueuetest.Fixture { return fixtureWith(t, postgres.Notify(true)) })
}

func fixture(t *testing.T) *sqlqueuetest.Fixture { return fixtureWith(t) }

func fixtureWith(t *testing.T, opts ...postgres.Option) *sqlqueuetest.Fixture {
	e := setup(t, opts...)
	sdb := stdlib.OpenDBFromPool(e.pool) // the pool's database/sql face, for the suite's own reads
	t.Cleanup(func() { sdb.Close() })
	own := sqlqueuetest.SQLTables{DB: sdb, Dialect: e.db.Dialect()}
	return &sqlqueuetest.Fixture{
		DB:          e.db.Queue(),
		Dialect:     e.db.Dialect(),
		Schema:      e.schema,
		CreateTable: e.db.CreateTable,
		Exec:        own.Exec,
		Count:       own.Count,
		Rows:        own.Rows,
		Lease:       func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.Lease(e.db, tb, g) },
		RowLock:     func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.RowLock(e.db, tb, g) },
		Advisory:    func(tb sqlqueue.Table, g string) (core.Endpoint, error) { return postgres.Advisory(e.db, tb, g) },
		LeakCheck:   leakCheck,
	}
}
