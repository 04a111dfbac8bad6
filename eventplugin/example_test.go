package eventplugin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin"
)

// auditAck is a plugin's Handler: its ack records an audit row, then deletes the queue row,
// both fenced by the delivery's lease in the lease form.
type auditAck struct{}

func (auditAck) Describe(context.Context) (eventplugin.Manifest, error) {
	return eventplugin.Manifest{Name: "audit", Handles: []eventplugin.Handles{{Event: eventplugin.EventAck}}}, nil
}

func (auditAck) Render(_ context.Context, r *eventplugin.Request) ([]eventplugin.Statement, error) {
	t, c := r.Table.QuotedName, r.Table.Quoted
	// where renders the row's condition with placeholders numbered from n, and its arguments.
	where := func(n int) (string, []any) {
		w, a := c.ID+" = "+r.Placeholder(n), []any{r.Row.ID}
		if r.Form == sqlqueue.FormLease {
			w, a = w+" AND "+c.LockedUntil+" = "+r.Placeholder(n+1), append(a, r.Row.Token)
		}
		return w, a
	}
	insWhere, insArgs := where(2)
	delWhere, delArgs := where(1)
	return []eventplugin.Statement{
		{SQL: "INSERT INTO audit (msg_id, at) SELECT " + c.ID + ", " + r.Placeholder(1) + " FROM " + t + " WHERE " + insWhere,
			Args: append([]any{r.Now}, insArgs...)},
		{SQL: "DELETE FROM " + t + " WHERE " + delWhere, Args: delArgs},
	}, nil
}

// A plugin's main function is eventplugin.Serve(auditAck{}). Here the Handler renders one ack
// directly, as the host would ask it for a PostgreSQL lease-form delivery.
func Example() {
	r := &eventplugin.Request{
		Event: eventplugin.EventAck, Dialect: "postgres", Form: sqlqueue.FormLease,
		Placeholders: eventplugin.PlaceholdersDollar,
		Table: eventplugin.Table{Table: sqlqueue.StandardTable("jobs"), QuotedName: `"jobs"`,
			Quoted: sqlqueue.Columns{ID: `"id"`, LockedUntil: `"locked_until"`}},
		Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Row: eventplugin.Row{ID: 7, Attempt: 1, Token: time.Date(2026, 1, 2, 3, 4, 35, 0, time.UTC)},
	}
	stmts, _ := auditAck{}.Render(context.Background(), r)
	for _, s := range stmts {
		fmt.Println(s.SQL, len(s.Args))
	}
	// Output:
	// INSERT INTO audit (msg_id, at) SELECT "id", $1 FROM "jobs" WHERE "id" = $2 AND "locked_until" = $3 3
	// DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2 2
}
