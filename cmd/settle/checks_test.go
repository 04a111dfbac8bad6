package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// with returns args with flag's value replaced by v.
func with(args []string, flag, v string) []string {
	out := slices.Clone(args)
	i := slices.Index(out, flag)
	out[i+1] = v
	return out
}

// oldestReady is the OLDEST READY column of stats' one row.
func oldestReady(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "OLDEST READY") {
		t.Fatalf("stats printed\n%s", out)
	}
	f := strings.Fields(lines[1])
	return f[len(f)-1]
}

// TestCLIEmptyGroupHint: on a table with a group column, a queue or dead letter no row has
// (a typo, or a queue nobody wrote to yet) shows zeros, and a hint on stderr says so; a group
// that has rows gets no hint.
func TestCLIEmptyGroupHint(t *testing.T) {
	for _, fx := range fixtures {
		if fx.name != "sqlite" && fx.name != "postgres" && fx.name != "mariadb" {
			continue // RabbitMQ and NATS answer a missing queue with exit 4
		}
		t.Run(fx.name, func(t *testing.T) {
			f := fx.make(t)
			f.addDead(t, []byte(`{"refund":1}`), deadHeaders(f.origin, "card closed", 3))
			hint := func(group string) string { return `no row has group "` + group + `" in table ` }
			const why = "(a typo, or an idle queue)"

			code, out, errOut := settle(t, append([]string{"stats"}, with(f.args, "--queue", "refundz")...)...)
			if code != exitOK || !strings.Contains(errOut, hint("refundz")) || !strings.Contains(errOut, why) || strings.Contains(errOut, "refunds.dead") {
				t.Errorf("stats --queue refundz: exit %d, stderr %q; want a hint about refundz only\n%s", code, errOut, out)
			}
			code, out, errOut = settle(t, append([]string{"stats"}, with(f.args, "--dead", "refunds.deadz")...)...)
			if code != exitOK || !strings.Contains(errOut, hint("refunds.deadz")) {
				t.Errorf("stats --dead refunds.deadz: exit %d, stderr %q\n%s", code, errOut, out)
			}
			code, out, errOut = settle(t, append([]string{"dead", "ls"}, with(f.args, "--dead", "refunds.deadz")...)...)
			if code != exitOK || !strings.Contains(out, "no dead letters") || !strings.Contains(errOut, hint("refunds.deadz")) {
				t.Errorf("dead ls --dead refunds.deadz: exit %d, stderr %q\n%s", code, errOut, out)
			}
			code, out, errOut = settle(t, append([]string{"dead", "purge", "--all"}, with(f.args, "--dead", "refunds.deadz")...)...)
			if code != exitOK || !strings.Contains(errOut, hint("refunds.deadz")) || f.dead(t) != 1 {
				t.Errorf("dead purge --all --dead refunds.deadz: exit %d, stderr %q\n%s", code, errOut, out)
			}

			f.addReady(t, []byte(`{"refund":2}`))
			for _, args := range [][]string{{"stats"}, {"dead", "ls"}} {
				code, out, errOut = settle(t, append(args, f.args...)...)
				if code != exitOK || errOut != "" {
					t.Errorf("%s on groups with rows: exit %d, stderr %q, want no hint\n%s", args, code, errOut, out)
				}
			}
		})
	}
}

// TestCLINonNumericID: where dead-letter ids are numbers (SQL row ids, JetStream sequences),
// another id is a usage error, refused before the backend is reached; on RabbitMQ, where an id
// is a message id, it is an unknown id.
func TestCLINonNumericID(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.make(t)
			want := exitUsage
			if fx.name == "rabbitmq" {
				want = exitNotFound
			}
			for _, args := range [][]string{{"dead", "show", "abc"}, {"dead", "redrive", "abc"}, {"dead", "purge", "1", "abc"}} {
				code, _, errOut := settle(t, append(args, f.args...)...)
				if code != want || (want == exitUsage && !strings.Contains(errOut, `dead-letter id "abc" is not a number`)) {
					t.Errorf("settle %s: exit %d, %q; want %d", args, code, errOut, want)
				}
			}
		})
	}
	// Refused before anything is opened: no server behind this DSN.
	code, _, errOut := settle(t, "dead", "show", "abc", "--dsn", "postgres://u@127.0.0.1:1/x", "--table", "jobs", "--queue", "q", "--dead", "d")
	if code != exitUsage || !strings.Contains(errOut, "on postgres an id is a row id") {
		t.Errorf("dead show abc on an unreachable PostgreSQL: exit %d, %q; want %d", code, errOut, exitUsage)
	}
}

// TestCLIOldestOfAnEmptyQueue: an empty queue has no oldest ready message: stats prints "-"
// (JSON null), not 0s; with a ready message it prints its age.
func TestCLIOldestOfAnEmptyQueue(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.make(t)
			code, out, errOut := settle(t, append([]string{"stats"}, f.args...)...)
			if code != exitOK || oldestReady(t, out) != "-" {
				t.Errorf("stats of an empty queue: exit %d, %s%s; want OLDEST READY -", code, out, errOut)
			}
			code, out, _ = settle(t, append([]string{"stats", "--json"}, f.args...)...)
			var st statsOut
			if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.OldestReadyS != nil {
				t.Errorf("stats --json of an empty queue: exit %d, %s; want oldest_ready_seconds null", code, out)
			}
			if f.addReady == nil {
				return
			}
			f.addReady(t, []byte(`{"refund":3}`))
			code, out, _ = settle(t, append([]string{"stats"}, f.args...)...)
			if age := oldestReady(t, out); code != exitOK || !strings.HasSuffix(age, "s") {
				t.Errorf("stats with one ready message: exit %d, OLDEST READY %q; want an age\n%s", code, age, out)
			}
		})
	}
}

func TestAllowedHosts(t *testing.T) {
	for _, c := range []struct {
		listen string
		flags  []string
		want   string
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1"},
		{"0.0.0.0:8080", []string{"ops.example.com, 10.0.0.5"}, "ops.example.com,10.0.0.5"},
		{":8080", []string{"a.example", "b.example"}, "a.example,b.example"},
		{"console.internal:8080", nil, "console.internal"},
	} {
		if got := strings.Join(allowedHosts(c.listen, c.flags), ","); got != c.want {
			t.Errorf("allowedHosts(%q, %q) = %q, want %q", c.listen, c.flags, got, c.want)
		}
	}
}

func TestTargetHost(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cret@db1:5432/app?table=jobs&queue=q": "db1:5432",
		"mysql://root:s3cret@tcp(db2:3306)/app?table=jobs":      "db2:3306",
		"amqp://guest:s3cret@mq1:5672/?queue=payouts":           "mq1:5672",
		"nats://127.0.0.1:4222?queue=orders":                    "127.0.0.1:4222",
		"sqlite:///var/lib/app/queue.db?table=jobs":             "/var/lib/app/queue.db",
	} {
		tg, err := parseTarget(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.host(); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("host of %s = %q, want %q", in, got, want)
		}
	}
}
