package mysql

import (
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// fixture opens a DB on a fresh database of s for one conformance test. With flavour set, the
// DB spells its statements as that flavour does whatever the server is: MySQL's statement set
// (no RETURNING: Publish reads LAST_INSERT_ID()) is valid SQL on MariaDB too, so it runs here
// even without a MySQL server.
func fixture(s testServer, flavour Flavour) sqlqueuetest.Open {
	return func(t *testing.T) *sqlqueuetest.Fixture {
		db := openDB(t, s)
		if flavour != 0 {
			db.dialect = newDialect(Version{Flavour: flavour}, nil)
		}
		// The suite's DSNs set parseTime=true; without it the driver returns DATETIME(6) text.
		own := sqlqueuetest.SQLTables{DB: db.Pool(), Dialect: db.Dialect(), ParseTime: func(s string) (time.Time, error) {
			return time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
		}}
		return &sqlqueuetest.Fixture{
			DB:          db.Queue(),
			Dialect:     db.Dialect(),
			Schema:      db.Database(),
			CreateTable: db.CreateTable,
			Exec:        own.Exec,
			Count:       own.Count,
			Rows:        own.Rows,
			Lease:       func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Lease(db, t, g) },
			RowLock:     func(t sqlqueue.Table, g string) (core.Endpoint, error) { return RowLock(db, t, g) },
			Advisory:    func(t sqlqueue.Table, g string) (core.Endpoint, error) { return Advisory(db, t, g) },
			LeakCheck:   leakCheck,
		}
	}
}

// TestConformance runs the whole sqlqueuetest suite on MariaDB, and on MySQL 8 when
// SETTLE_TEST_MYSQL_URL names one.
func TestConformance(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		sqlqueuetest.Run(t, fixture(s, 0))
	})
}

// TestConformanceMySQLFlavourOnMariaDB runs the suite on MariaDB with the MySQL flavour's
// statement set, so that both statement sets run even where no MySQL server is installed.
func TestConformanceMySQLFlavourOnMariaDB(t *testing.T) {
	sqlqueuetest.Run(t, fixture(mariadbServer(t), MySQL))
}
