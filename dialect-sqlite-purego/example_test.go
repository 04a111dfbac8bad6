package sqlitepure_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlitepure "github.com/settlehq/settle/dialect-sqlite-purego"
)

type Email struct {
	To string `json:"to"`
}

// A queue table in a SQLite file, with no cgo: create it, publish a message, and consume it in the lease
// form. Ack marks the row processed (the standard table has a processed_at column).
func Example() {
	dir, _ := os.MkdirTemp("", "settle-purego-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := sqlitepure.Open(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	table := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, table); err != nil {
		fmt.Println(err)
		return
	}
	pub, _ := sqlitepure.NewPublisher(db, table, "emails")
	if _, err := sqlqueue.Publish(ctx, pub, Email{To: "ada@example.com"}); err != nil {
		fmt.Println(err)
		return
	}

	app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals())
	app.Register(db)
	emails, _ := sqlitepure.Lease(db, table, "emails")
	_ = core.Subscribe(app, emails, func(ctx context.Context, m *core.Message[Email]) error {
		fmt.Println("sending to", m.Payload.To, "attempt", m.Attempt())
		cancel() // one message is enough for the example
		return nil
	})
	if err := app.Run(ctx); err != nil {
		fmt.Println(err)
	}

	check, _ := sqlitepure.Open(context.Background(), filepath.Join(dir, "jobs.db"))
	defer check.Close()
	var processed int
	_ = check.Pool().QueryRow(`SELECT COUNT(*) FROM jobs WHERE processed_at IS NOT NULL`).Scan(&processed)
	fmt.Println("processed rows:", processed)
	// Output:
	// sending to ada@example.com attempt 1
	// processed rows: 1
}

// The DDL of a queue table without groups, deleting acknowledged rows.
func ExampleTableDDL() {
	t := sqlqueue.StandardTable("payouts")
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	ddl, _ := sqlitepure.TableDDL(t)
	fmt.Println(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS "payouts" (
	//   "id" INTEGER PRIMARY KEY AUTOINCREMENT,
	//   "payload" BLOB NOT NULL,
	//   "attempt" INTEGER NOT NULL DEFAULT 0,
	//   "retry_after" TEXT,
	//   "locked_until" TEXT,
	//   "headers" TEXT,
	//   "created_at" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')
	// );
}
