// A user's first program with the cgo-free SQLite dialect, built by ci/consumer.sh with
// CGO_ENABLED=0 in a fresh module outside the workspace from the published modules: it creates a
// queue table in the file named by its argument, publishes one message, acknowledges it in a
// handler and checks that the row is marked processed.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlitepure "github.com/settlehq/settle/dialect-sqlite-purego"
)

type email struct {
	To string `json:"to"`
}

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer-sqlitepure:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlitepure.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	table := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, table); err != nil {
		return err
	}
	pub, err := sqlitepure.NewPublisher(db, table, "emails")
	if err != nil {
		return err
	}
	if _, err := sqlqueue.Publish(ctx, pub, email{To: "ada@example.com"}); err != nil {
		return err
	}

	app := core.New(core.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))), core.WithoutSignals())
	emails, err := sqlitepure.Lease(db, table, "emails")
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	var got email
	if err := core.Subscribe(app, emails, func(_ context.Context, m *core.Message[email]) error {
		got = m.Payload
		stop()
		return nil
	}); err != nil {
		return err
	}
	if err := app.Run(runCtx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no message handled within the deadline: %w", ctx.Err())
	}
	var processed int
	if err := db.Pool().QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE processed_at IS NOT NULL`).Scan(&processed); err != nil {
		return err
	}
	if got.To != "ada@example.com" || processed != 1 {
		return fmt.Errorf("handled %+v, %d rows processed; want ada@example.com and 1", got, processed)
	}
	fmt.Println("sqlitepure: published, handled and acknowledged one message; processed rows:", processed)
	return nil
}
