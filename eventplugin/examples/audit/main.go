// Command audit is an example settle event plugin (package main). Its ack records an audit row
// before settling the queue row, and its retry_after caps the delay a handler asks for.
//
// Build it, then load it from a service:
//
//	go build -o bin/audit ./examples/audit
//	p, err := eventplugin.Load(ctx, "bin/audit", eventplugin.Args("-max-delay", "1m"))
//
// Flags:
//
//	-audit-table name   the audit table (default settle_audit): columns queue, msg_id,
//	                    attempt, outcome, at (see -print-ddl)
//	-max-delay d        the longest retry_after delay (default 1m)
//	-print-ddl dialect  print the audit table's CREATE TABLE for dialect and exit
//
// Both statements of an event are fenced like the dialect's own: in the lease form they match
// the row only while it still holds the delivery's lease, so a lost lease changes nothing and
// settle reports it as lost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin"
)

// auditDDL returns the statement that creates the audit table in dialect.
func auditDDL(dialect, table string) string {
	at := "TIMESTAMP"
	switch dialect {
	case "sqlite":
		at = "TEXT"
	case "mysql", "mariadb":
		at = "DATETIME(6)"
	}
	return "CREATE TABLE IF NOT EXISTS " + quote(dialect, table) + " (queue VARCHAR(200) NOT NULL, msg_id BIGINT NOT NULL, " +
		"attempt BIGINT NOT NULL, outcome VARCHAR(20) NOT NULL, at " + at + " NOT NULL)"
}

// audit is the plugin's Handler.
type audit struct {
	table    string
	maxDelay time.Duration
}

func (a audit) Describe(context.Context) (eventplugin.Manifest, error) {
	return eventplugin.Manifest{Name: "audit", Handles: []eventplugin.Handles{
		{Event: eventplugin.EventAck},
		{Event: eventplugin.EventRetryAfter},
	}}, nil
}

func (a audit) Render(_ context.Context, r *eventplugin.Request) ([]eventplugin.Statement, error) {
	switch r.Event {
	case eventplugin.EventAck:
		return a.ack(r)
	case eventplugin.EventRetryAfter:
		return a.retryAfter(r)
	}
	return nil, fmt.Errorf("audit renders ack and retry_after, not %s", r.Event)
}

// fence renders the condition that the row is still this delivery's, with placeholders
// numbered from n, and its arguments.
func fence(r *eventplugin.Request, n int) (string, []any) {
	c := r.Table.Quoted
	w, args := c.ID+" = "+r.Placeholder(n), []any{r.Row.ID}
	if r.Form == sqlqueue.FormLease {
		w += " AND " + c.LockedUntil + " = " + r.Placeholder(n+1)
		args = append(args, r.Row.Token)
	}
	return w, args
}

func (a audit) ack(r *eventplugin.Request) ([]eventplugin.Statement, error) {
	t, c := r.Table.QuotedName, r.Table.Quoted
	// The audit row copies the id from the queue row itself, so it is written only while the
	// row is still the delivery's.
	w, fa := fence(r, 4)
	insert := eventplugin.Statement{
		SQL: "INSERT INTO " + quote(r.Dialect, a.table) + " (queue, msg_id, attempt, outcome, at) SELECT " +
			r.Placeholder(1) + ", " + c.ID + ", " + r.Placeholder(2) + ", 'ack', " + r.Placeholder(3) + " FROM " + t + " WHERE " + w,
		Args: append([]any{r.Queue, int64(r.Row.Attempt), r.Now}, fa...),
	}
	var settle eventplugin.Statement
	if c.ProcessedAt != "" {
		w, fa := fence(r, 2)
		settle = eventplugin.Statement{SQL: "UPDATE " + t + " SET " + c.ProcessedAt + " = " + r.Placeholder(1) + " WHERE " + w,
			Args: append([]any{r.Now}, fa...)}
	} else {
		w, fa := fence(r, 1)
		settle = eventplugin.Statement{SQL: "DELETE FROM " + t + " WHERE " + w, Args: fa}
	}
	return []eventplugin.Statement{insert, settle}, nil
}

func (a audit) retryAfter(r *eventplugin.Request) ([]eventplugin.Statement, error) {
	t, c := r.Table.QuotedName, r.Table.Quoted
	if c.RetryAfter == "" {
		return nil, fmt.Errorf("table %s has no retry_after column", r.Table.Name)
	}
	at := r.RetryAt
	if r.Delay > a.maxDelay {
		at = r.Now.Add(a.maxDelay)
	}
	set := c.RetryAfter + " = " + r.Placeholder(1)
	switch {
	case r.Form == sqlqueue.FormLease:
		set += ", " + c.LockedUntil + " = NULL"
	case r.Form == sqlqueue.FormRowLock && c.Attempt != "":
		set += ", " + c.Attempt + " = " + c.Attempt + " + 1"
	}
	w, fa := fence(r, 2)
	return []eventplugin.Statement{{SQL: "UPDATE " + t + " SET " + set + " WHERE " + w, Args: append([]any{at}, fa...)}}, nil
}

// quote quotes a validated identifier for dialect.
func quote(dialect, ident string) string {
	if dialect == "mysql" || dialect == "mariadb" {
		return "`" + ident + "`"
	}
	return `"` + ident + `"`
}

// parse reads the flags; ddlFor is the dialect of -print-ddl.
func parse(args []string) (a audit, ddlFor string, err error) {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	table := fs.String("audit-table", "settle_audit", "the audit table")
	maxDelay := fs.Duration("max-delay", time.Minute, "the longest retry_after delay")
	fs.StringVar(&ddlFor, "print-ddl", "", "print the audit table's CREATE TABLE for this dialect (sqlite, postgres, mysql, mariadb) and exit")
	if err := fs.Parse(args); err != nil {
		return audit{}, "", err
	}
	if !sqlqueue.ValidIdent(*table) {
		return audit{}, "", fmt.Errorf("-audit-table %q: letters, digits, _ and $, starting with a letter or _", *table)
	}
	if *maxDelay <= 0 {
		return audit{}, "", errors.New("-max-delay must be positive")
	}
	switch ddlFor {
	case "", "sqlite", "postgres", "mysql", "mariadb":
	default:
		return audit{}, "", fmt.Errorf("-print-ddl %q: sqlite, postgres, mysql or mariadb", ddlFor)
	}
	return audit{table: *table, maxDelay: *maxDelay}, ddlFor, nil
}

func main() {
	a, ddlFor, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit:", strings.TrimSpace(err.Error()))
		os.Exit(2)
	}
	if ddlFor != "" {
		fmt.Println(auditDDL(ddlFor, a.table))
		return
	}
	eventplugin.Serve(a)
}
