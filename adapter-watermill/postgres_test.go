package settlewatermill_test

import (
	"context"
	"testing"

	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// postgresDB opens the test server (SETTLE_TEST_PG_URL) with a pool large enough for the
// suite's 50 competing subscribers, or skips (fails under SETTLE_REQUIRE_SERVERS=1).
func postgresDB(t *testing.T) *postgres.DB {
	t.Helper()
	url := coretest.PostgresURL()
	ctx := context.Background()
	sep := "?"
	for _, c := range url {
		if c == '?' {
			sep = "&"
		}
	}
	db, err := postgres.Open(ctx, url+sep+"pool_max_conns=50")
	if err == nil {
		err = db.Start(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(t, "PostgreSQL", url, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// dropAfter drops the suite's tables when t ends.
func dropAfter(t *testing.T, exec func(ctx context.Context, sql string) error, quote func(string) string, table string) {
	t.Cleanup(func() {
		for _, name := range []string{table, table + "_consumer_groups"} {
			if err := exec(context.Background(), "DROP TABLE IF EXISTS "+quote(name)); err != nil {
				t.Errorf("drop table %s: %v", name, err)
			}
		}
	})
}

func runPostgres(t *testing.T, short bool, form settlewatermill.SQLForm[*postgres.DB], mount ...core.Option) {
	db := postgresDB(t)
	table := queueTable("wm_" + suffix())
	dropAfter(t, func(ctx context.Context, sql string) error { _, err := db.Pool().Exec(ctx, sql); return err },
		db.Dialect().Quote, table.Name)
	queues, err := settlewatermill.SQL(db, table, form, postgres.NewPublisher, settlewatermill.CreateTables())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := settlewatermill.SQL(db, table, form, postgres.NewPublisher, settlewatermill.CreateTables(), settlewatermill.FanOut())
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, short, queues, groups, mount...)
}

// TestPubSubPostgresLease runs Watermill's universal suite on PostgreSQL, lease form.
func TestPubSubPostgresLease(t *testing.T) { runPostgres(t, false, postgres.Lease) }

// TestPubSubPostgresRowLock runs Watermill's universal suite on PostgreSQL, row-lock form,
// with the suite's smaller counts (rowLockShort).
func TestPubSubPostgresRowLock(t *testing.T) { runPostgres(t, rowLockShort, postgres.RowLock) }

var _ = sqlqueue.StandardTable

// TestPubSubPostgresAdvisory runs Watermill's universal suite on PostgreSQL, advisory form,
// with the suite's smaller counts (advisoryShort).
func TestPubSubPostgresAdvisory(t *testing.T) { runPostgres(t, advisoryShort, postgres.Advisory) }
