package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// TestConnLostOnEveryPath: a backend terminated under a reserved connection or a transaction
// makes every later call on it fail with an error matching ErrConnLost: statements, Begin on
// the connection, Commit and Rollback of a transaction (pgx reports some of these as a bare
// "conn closed" or the server's FATAL 57P01).
func TestConnLostOnEveryPath(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	pid := func(q sqlqueue.Queryer) int32 {
		rows, err := q.Query(ctx, "SELECT pg_backend_pid()")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var p int32
		if !rows.Next() {
			t.Fatal(rows.Err())
		}
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		return p
	}
	kill := func(p int32) {
		if n := terminate(t, "SELECT $1::int", p); n != 1 {
			t.Fatalf("terminated %d backends", n)
		}
	}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, postgres.ErrConnLost) {
			t.Errorf("%s after the backend was terminated: %v; want an error matching postgres.ErrConnLost", what, err)
		}
	}

	c, err := e.db.Queue().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(pid(c))
	_, err = c.Begin(ctx)
	lost("Conn.Begin", err)
	_, err = c.Exec(ctx, "SELECT 1")
	lost("Conn.Exec", err)
	_ = c.Discard()

	c, err = e.db.Queue().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(pid(tx))
	_, err = tx.Exec(ctx, "SELECT 1")
	lost("Transaction.Exec on a reserved connection", err)
	lost("Transaction.Commit on a reserved connection", tx.Commit(ctx))
	_ = c.Discard()

	tx, err = e.db.Queue().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(pid(tx))
	lost("Transaction.Commit of the pool", tx.Commit(ctx))

	tx, err = e.db.Queue().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(pid(tx))
	_, err = tx.Query(ctx, "SELECT 1")
	lost("Transaction.Query of the pool", err)
	lost("Transaction.Rollback of the pool", tx.Rollback(ctx))
}
