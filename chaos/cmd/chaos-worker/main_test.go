package main

import (
	"strings"
	"testing"
)

func TestParseRefusesBadFlagsNamingThem(t *testing.T) {
	base := []string{"-ledger", "/tmp/l", "-state", "/tmp/s"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-backend is required"},
		{[]string{"-backend", "oracle", "-dsn", "x"}, `-backend "oracle"`},
		{[]string{"-backend", "postgres", "-table", "t"}, "-dsn is required"},
		{[]string{"-backend", "postgres", "-dsn", "postgres://u@10.0.0.5:5432/db", "-table", "t", "-mix", "ack=1"}, "not a loopback address"},
		{[]string{"-backend", "mariadb", "-dsn", "root@tcp(db.example.com:3306)/x", "-table", "t", "-mix", "ack=1"}, "not a loopback address"},
		{[]string{"-backend", "rabbitmq", "-dsn", "amqp://guest:guest@192.168.1.2:5672/", "-mix", "ack=1"}, "not a loopback address"},
		{[]string{"-backend", "nats", "-dsn", "nats://10.1.1.1:4222", "-mix", "ack=1"}, "not a loopback address"},
		{[]string{"-backend", "nats", "-dsn", "nats://127.0.0.1:4230", "-transactional"}, "for SQL backends"},
		{[]string{"-backend", "sqlite", "-dsn", "/tmp/q.db", "-form", "rowlock", "-table", "t"}, "SQLite has no row locks"},
		{[]string{"-backend", "postgres", "-dsn", "postgres://u@127.0.0.1/db", "-form", "queue", "-table", "t"}, `-form "queue"`},
		{[]string{"-backend", "postgres", "-dsn", "postgres://u@127.0.0.1/db", "-table", "t"}, "need -transactional"},
		{[]string{"-backend", "postgres", "-dsn", "postgres://u@127.0.0.1/db", "-table", "t", "-transactional"}, "-side-table is required"},
		{[]string{"-backend", "postgres", "-dsn", "postgres://u@127.0.0.1/db", "-table", "t", "-mix", "ack=1", "-cap", "0"}, "-cap 0"},
		{[]string{"-backend", "rabbitmq", "-dsn", "amqp://127.0.0.1/", "-mix", "ack=1,retry_after=1"}, "-delay none: the mix has retry_after"},
		{[]string{"-backend", "rabbitmq", "-dsn", "amqp://127.0.0.1/", "-mix", "ack=1", "-queue-type", "quorum", "-publish", "confirmed"}, "quorum queue takes no publish policy"},
		{[]string{"-backend", "rabbitmq", "-dsn", "amqp://127.0.0.1/", "-mix", "ack=1", "-transactional"}, "for SQL backends"},
		{[]string{"-backend", "sqlite", "-dsn", "/tmp/q.db", "-table", "t", "-mix", "bogus=1"}, "-mix: "},
		{[]string{"-backend", "sqlite", "-dsn", "/tmp/q.db", "-table", "1bad", "-mix", "ack=1"}, ""},
	} {
		_, _, err := parse(append(append([]string{}, base...), c.args...))
		if c.want == "" {
			if err != nil {
				t.Errorf("parse(%q): %v (the table name is checked when the worker opens it)", c.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestQueueTableReadsSchemaQualifiedNames(t *testing.T) {
	tb, err := queueTable("public.jobs")
	if err != nil || tb.Schema != "public" || tb.Name != "jobs" {
		t.Fatalf("queueTable(public.jobs) = %+v, %v", tb, err)
	}
	if _, err := queueTable("bad name"); err == nil || !strings.Contains(err.Error(), `-table "bad name"`) {
		t.Fatalf("queueTable(bad name): %v", err)
	}
}
