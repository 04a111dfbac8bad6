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
func TestPubSubSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "watermill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := queueTable("watermill")
	queues, err := settlewatermill.SQL(db, table, sqlite.Lease, sqlite.NewPublisher, settlewatermill.CreateTables())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := settlewatermill.SQL(db, table, sqlite.Lease, sqlite.NewPublisher, settlewatermill.CreateTables(), settlewatermill.FanOut())
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, false, queues, groups)
}
