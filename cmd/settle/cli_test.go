package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCLI runs every command on each backend, checking the output and exit codes, and what the
// backend holds afterwards with its own client.
func TestCLI(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.make(t)
			reasons := []string{"card processor timeout", "card closed", "card processor timeout"}
			var ids []string
			for i, r := range reasons {
				ids = append(ids, f.addDead(t, []byte(fmt.Sprintf(`{"refund":%d,"card":"4242"}`, i)), deadHeaders(f.origin, r, 5)))
			}
			cmd := func(args ...string) []string { return append(args, f.args...) }

			code, out, errOut := settle(t, cmd("stats", "--json")...)
			var st statsOut
			if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Dead == nil || *st.Dead != 3 || st.Ready == nil || *st.Ready != 0 {
				t.Fatalf("stats --json: exit %d, %s%s", code, out, errOut)
			}
			code, out, _ = settle(t, cmd("stats")...)
			if code != exitOK || !strings.Contains(out, "READY") || !strings.Contains(out, f.origin) {
				t.Errorf("stats: exit %d\n%s", code, out)
			}

			code, out, _ = settle(t, cmd("dead", "ls")...)
			if code != exitOK || !strings.Contains(out, "REASON") || !strings.Contains(out, "card closed") || strings.Count(out, "\n") != 4 {
				t.Errorf("dead ls: exit %d\n%s", code, out)
			}
			code, out, _ = settle(t, cmd("dead", "ls", "--json", "--reason", "timeout")...)
			var page pageOut
			if code != exitOK || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 2 ||
				page.Items[0].ID != ids[0] || page.Items[1].ID != ids[2] || page.Items[0].Count != 5 || page.Items[0].Origin != f.origin {
				t.Errorf("dead ls --json --reason timeout: exit %d\n%s", code, out)
			}
			code, out, _ = settle(t, cmd("dead", "ls", "--limit", "2")...)
			if code != exitOK || !strings.Contains(out, "more: --cursor") {
				t.Errorf("dead ls --limit 2 shows no cursor: exit %d\n%s", code, out)
			}

			code, out, _ = settle(t, cmd("dead", "show", ids[1])...)
			if code != exitOK || !strings.Contains(out, "reason:   card closed") || !strings.Contains(out, `  "refund": 1,`) {
				t.Errorf("dead show: exit %d\n%s", code, out)
			}
			code, _, errOut = settle(t, cmd("dead", "show", "987654321")...)
			if code != exitNotFound || !strings.Contains(errOut, "987654321") {
				t.Errorf("dead show of an unknown id: exit %d, %s", code, errOut)
			}

			code, _, errOut = settle(t, cmd("dead", "purge")...)
			if code != exitUsage || f.dead(t) != 3 {
				t.Errorf("dead purge without a selection: exit %d (%s), %d dead letters left", code, errOut, f.dead(t))
			}
			code, _, errOut = settle(t, cmd("dead", "redrive", ids[0], "987654321")...)
			if code != exitNotFound || f.dead(t) != 3 || f.queued(t) != 0 {
				t.Errorf("dead redrive with an unknown id: exit %d (%s); want %d and nothing moved", code, errOut, exitNotFound)
			}

			code, out, _ = settle(t, cmd("dead", "redrive", ids[0])...)
			if code != exitOK || !strings.Contains(out, "redriven 1 dead letter") {
				t.Errorf("dead redrive: exit %d\n%s", code, out)
			}
			if q, d := f.queued(t), f.dead(t); q != 1 || d != 2 {
				t.Errorf("after redriving one: the queue holds %d, the dead letter %d; want 1 and 2", q, d)
			}
			code, out, _ = settle(t, cmd("dead", "purge", "--reason", "closed", "--json")...)
			if code != exitOK || !strings.Contains(out, `"done": 1`) {
				t.Errorf("dead purge --reason closed: exit %d\n%s", code, out)
			}
			code, out, _ = settle(t, cmd("dead", "purge", "--all")...)
			if code != exitOK || !strings.Contains(out, "purged 1 dead letter") || f.dead(t) != 0 || f.queued(t) != 1 {
				t.Errorf("dead purge --all: exit %d\n%s; dead %d, queued %d", code, out, f.dead(t), f.queued(t))
			}
		})
	}
}

// TestCLIErrors checks the exit codes and messages of wrong targets.
func TestCLIErrors(t *testing.T) {
	f := sqliteFixture(t)
	dsn := f.args[1]
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no command", nil, exitUsage, "no command"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"no dsn", []string{"stats"}, exitUsage, "--dsn"},
		{"bad scheme", []string{"stats", "--dsn", "oracle://x"}, exitUsage, "oracle"},
		{"no such file", []string{"stats", "--dsn", "sqlite:///nowhere/q.db", "--table", "jobs"}, exitUnreachable, "no database file"},
		{"no such table", []string{"stats", "--dsn", dsn, "--table", "nowhere"}, exitNoTarget, "nowhere"},
		{"group needed", []string{"stats", "--dsn", dsn, "--table", "jobs"}, exitUsage, "group column"},
		{"no dead letter named", []string{"dead", "ls", "--dsn", dsn, "--table", "jobs", "--queue", "refunds"}, exitUsage, "no dead letter"},
		{"unreachable postgres", []string{"stats", "--dsn", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", "--table", "jobs"}, exitUnreachable, "cannot reach"},
		{"unreachable rabbitmq", []string{"stats", "--dsn", "amqp://guest:secret@127.0.0.1:1/", "--queue", "q"}, exitUnreachable, "xxxxx"},
		{"unreachable nats", []string{"stats", "--dsn", "nats://127.0.0.1:1", "--queue", "q"}, exitUnreachable, "cannot reach"},
		{"show takes one id", []string{"dead", "show", "--dsn", dsn, "--table", "jobs", "--queue", "refunds", "--dead", "d"}, exitUsage, "one dead-letter id"},
		{"management on sql", []string{"stats", "--dsn", dsn, "--table", "jobs", "--management", "http://127.0.0.1:15672"}, exitUsage, "management API"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := settle(t, c.args...)
			if code != c.code || !strings.Contains(errOut, c.says) {
				t.Errorf("settle %q: exit %d, %q; want %d mentioning %q", c.args, code, errOut, c.code, c.says)
			}
			if strings.Contains(errOut, "secret") {
				t.Errorf("the error shows the password: %s", errOut)
			}
		})
	}
}

// TestParseTarget reads --target strings, keeping the driver's own parameters.
func TestParseTarget(t *testing.T) {
	for in, want := range map[string]target{
		"sqlite:///var/q.db?table=jobs&queue=refunds&dead=refunds.dead": {kind: "sqlite", raw: "sqlite:///var/q.db", dsn: "/var/q.db", table: "jobs", queue: "refunds", dead: "refunds.dead"},
		"postgres://u@h/db?sslmode=disable&table=jobs&dead=jobs_dead":   {kind: "postgres", raw: "postgres://u@h/db?sslmode=disable", dsn: "postgres://u@h/db?sslmode=disable", table: "jobs", dead: "jobs_dead"},
		"mysql://root@tcp(h:3306)/test?parseTime=true&table=t&queue=q":  {kind: "mysql", raw: "mysql://root@tcp(h:3306)/test?parseTime=true", dsn: "root@tcp(h:3306)/test?parseTime=true", table: "t", queue: "q"},
		"amqp://g:g@h:5672/?queue=payouts&dead=payouts.dead&waiting=a":  {kind: "amqp", raw: "amqp://g:g@h:5672/", dsn: "amqp://g:g@h:5672/", queue: "payouts", dead: "payouts.dead", wait: []string{"a"}},
		"amqp://g:g@h:5672/v?queue=p&management=http://g:g@h:15672":     {kind: "amqp", raw: "amqp://g:g@h:5672/v", dsn: "amqp://g:g@h:5672/v", queue: "p", management: "http://g:g@h:15672"},
	} {
		got, err := parseTarget(in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}
