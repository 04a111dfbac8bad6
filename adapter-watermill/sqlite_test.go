package settlewatermill_test

import (
	"context"
	"path/filepath"
	"testing"

	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// queueTable is the table every suite runs on: the standard columns, rows deleted when they
// are acked (no processed_at).
func queueTable(name string) sqlqueue.Table {
	t := sqlqueue.StandardTable(name)
	t.Columns.ProcessedAt = ""
	return t
}

// TestPubSubSQLite runs Watermill's universal suite on a SQLite file, lease form.
func TestPubSubSQLite(t *testing.T) { runSQLite(t, false, sqlite.Lease) }

// TestPubSubSQLiteAdvisory runs Watermill's universal suite on a SQLite file, advisory form,
// with the suite's smaller counts: the full counts pass too (SETTLE_WATERMILL_SUITE=full, 77 s
// without -race), but would take the module past go test's 10-minute limit under -race in CI.
func TestPubSubSQLiteAdvisory(t *testing.T) { runSQLite(t, true, sqlite.Advisory) }

func runSQLite(t *testing.T, short bool, form settlewatermill.SQLForm[*sqlite.DB]) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "watermill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := queueTable("watermill")
	queues, err := settlewatermill.SQL(db, table, form, sqlite.NewPublisher, settlewatermill.CreateTables())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := settlewatermill.SQL(db, table, form, sqlite.NewPublisher, settlewatermill.CreateTables(), settlewatermill.FanOut())
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, short, queues, groups)
}
