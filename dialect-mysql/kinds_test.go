package mysql

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// TestBooleanTimeColumnRefused: a time column of a boolean type is refused when the
// subscription starts, with an error naming the table, the column and its role (it used to pass
// the check, and every claim then failed without naming either).
func TestBooleanTimeColumnRefused(t *testing.T) {
	for _, role := range []string{"locked_until", "retry_after"} {
		t.Run(role, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, mariadbServer(t))
			tb := sqlqueue.StandardTable("boolq")
			if err := db.CreateTable(ctx, tb); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Pool().ExecContext(ctx, "ALTER TABLE boolq ADD COLUMN flag BOOLEAN"); err != nil {
				t.Fatal(err)
			}
			if role == "locked_until" {
				tb.Columns.LockedUntil = "flag"
			} else {
				tb.Columns.RetryAfter = "flag"
			}
			ep, err := Lease(db, tb, "q")
			if err != nil {
				t.Fatal(err)
			}
			app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
			if err := core.Subscribe(app, ep, func(context.Context, *core.Message[string]) error { return nil }); err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = app.Run(runCtx)
			var ce *sqlqueue.ColumnError
			if !errors.As(err, &ce) || ce.Column != "flag" || ce.Role != role || !strings.Contains(err.Error(), "boolq") || !strings.Contains(err.Error(), "boolean") {
				t.Fatalf("start with a BOOLEAN %s: %v; want a ColumnError naming table boolq, column flag and its boolean type", role, err)
			}
		})
	}
}
