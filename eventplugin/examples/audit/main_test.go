package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin"
)

// connect serves a in process, as a plugin's own tests should, and returns the host's view.
func connect(t *testing.T, a audit) eventplugin.Handler {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{eventplugin.PluginName: &eventplugin.GRPCPlugin{Impl: a}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(eventplugin.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(eventplugin.Handler)
}

func request(ev eventplugin.Event, dialect string, form sqlqueue.Form) *eventplugin.Request {
	ph, q := eventplugin.PlaceholdersQuestion, func(s string) string { return `"` + s + `"` }
	if dialect == "postgres" {
		ph = eventplugin.PlaceholdersDollar
	}
	if dialect == "mariadb" {
		q = func(s string) string { return "`" + s + "`" }
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &eventplugin.Request{
		Event: ev, Dialect: dialect, Form: form, Placeholders: ph, Queue: "refunds",
		Table: eventplugin.Table{Table: sqlqueue.StandardTable("refunds"), QuotedName: q("refunds"), Quoted: sqlqueue.Columns{
			ID: q("id"), Attempt: q("attempt"), RetryAfter: q("retry_after"), LockedUntil: q("locked_until")}},
		Now: now, Row: eventplugin.Row{ID: 7, Attempt: 2, Token: now.Add(30 * time.Second)},
	}
}

func TestAckRecordsAnAuditRowFencedByTheLease(t *testing.T) {
	h := connect(t, audit{table: "settle_audit", maxDelay: time.Minute})
	stmts, err := h.Render(context.Background(), request(eventplugin.EventAck, "postgres", sqlqueue.FormLease))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`INSERT INTO "settle_audit" (queue, msg_id, attempt, outcome, at) SELECT $1, "id", $2, 'ack', $3 FROM "refunds" WHERE "id" = $4 AND "locked_until" = $5`,
		`DELETE FROM "refunds" WHERE "id" = $1 AND "locked_until" = $2`,
	}
	if len(stmts) != 2 || stmts[0].SQL != want[0] || stmts[1].SQL != want[1] {
		t.Fatalf("ack renders\n%v\nwant\n%v", stmts, want)
	}
	if len(stmts[0].Args) != 5 || stmts[0].Args[0] != "refunds" || stmts[0].Args[1] != int64(2) || len(stmts[1].Args) != 2 {
		t.Errorf("arguments %v, %v", stmts[0].Args, stmts[1].Args)
	}
}

func TestRetryAfterCapsTheDelay(t *testing.T) {
	h := connect(t, audit{table: "settle_audit", maxDelay: time.Minute})
	for _, c := range []struct {
		delay, want time.Duration
	}{{time.Hour, time.Minute}, {10 * time.Second, 10 * time.Second}} {
		r := request(eventplugin.EventRetryAfter, "mariadb", sqlqueue.FormRowLock)
		r.Delay, r.RetryAt = c.delay, r.Now.Add(c.delay)
		stmts, err := h.Render(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if want := "UPDATE `refunds` SET `retry_after` = ?, `attempt` = `attempt` + 1 WHERE `id` = ?"; len(stmts) != 1 || stmts[0].SQL != want {
			t.Fatalf("retry_after renders %v, want %q", stmts, want)
		}
		if at := stmts[0].Args[0].(time.Time); !at.Equal(r.Now.Add(c.want)) {
			t.Errorf("delay %v: retry_after %v, want now + %v", c.delay, at, c.want)
		}
	}
}

func TestRetryAfterNeedsTheColumn(t *testing.T) {
	h := connect(t, audit{table: "settle_audit", maxDelay: time.Minute})
	r := request(eventplugin.EventRetryAfter, "sqlite", sqlqueue.FormLease)
	r.Table.Quoted.RetryAfter = ""
	if _, err := h.Render(context.Background(), r); err == nil || !strings.Contains(err.Error(), "no retry_after column") {
		t.Fatalf("err = %v", err)
	}
}

func TestFlags(t *testing.T) {
	if a, ddl, err := parse([]string{"-max-delay", "2m", "-audit-table", "audit_log", "-print-ddl", "mariadb"}); err != nil || a.maxDelay != 2*time.Minute || a.table != "audit_log" || ddl != "mariadb" {
		t.Fatalf("parse = %+v, %q, %v", a, ddl, err)
	}
	for _, bad := range [][]string{{"-audit-table", "x; DROP TABLE y"}, {"-max-delay", "0s"}, {"-print-ddl", "oracle"}} {
		if _, _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
