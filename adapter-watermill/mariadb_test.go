package settlewatermill_test

import (
	"context"
	"testing"

	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	mysql "github.com/settlehq/settle/dialect-mysql"
)

// mariadbDB opens the test server (SETTLE_TEST_MARIADB_URL), or skips (fails under
// SETTLE_REQUIRE_SERVERS=1).
func mariadbDB(t *testing.T) *mysql.DB {
	t.Helper()
	dsn := coretest.MariaDBDSN()
	db, err := mysql.Open(context.Background(), dsn)
	if err != nil {
		coretest.ServerUnavailable(t, "MariaDB", dsn, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func runMariaDB(t *testing.T, short bool, form settlewatermill.SQLForm[*mysql.DB], mount ...core.Option) {
	db := mariadbDB(t)
	table := queueTable("wm_" + suffix())
	dropAfter(t, func(ctx context.Context, sql string) error { _, err := db.Pool().ExecContext(ctx, sql); return err },
		db.Dialect().Quote, table.Name)
	queues, err := settlewatermill.SQL(db, table, form, mysql.NewPublisher, settlewatermill.CreateTables())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := settlewatermill.SQL(db, table, form, mysql.NewPublisher, settlewatermill.CreateTables(), settlewatermill.FanOut())
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, short, queues, groups, mount...)
}

// TestPubSubMariaDBLease runs Watermill's universal suite on MariaDB, lease form.
func TestPubSubMariaDBLease(t *testing.T) { runMariaDB(t, false, mysql.Lease) }

// TestPubSubMariaDBRowLock runs Watermill's universal suite on MariaDB, row-lock form,
// with the suite's smaller counts (rowLockShort).
func TestPubSubMariaDBRowLock(t *testing.T) { runMariaDB(t, rowLockShort, mysql.RowLock) }

// TestPubSubMariaDBAdvisory runs Watermill's universal suite on MariaDB, advisory form, with the
// suite's smaller counts (advisoryShort).
func TestPubSubMariaDBAdvisory(t *testing.T) { runMariaDB(t, advisoryShort, mysql.Advisory) }
