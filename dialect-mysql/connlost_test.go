package mysql

import (
	"context"
	"errors"
	"testing"

	"github.com/settlehq/settle/core/sqlqueue"
)

// TestConnLostOnEveryPath: a session killed on the server under a reserved connection or a
// transaction makes every later call on it fail with an error matching ErrConnLost:
// statements, Begin on the connection, Commit and Rollback.
func TestConnLostOnEveryPath(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	id := func(q sqlqueue.Queryer) int64 {
		rows, err := q.Query(ctx, "SELECT CONNECTION_ID()")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := scanOne(rows, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	kill := func(n int64) {
		if _, err := db.Pool().ExecContext(ctx, "KILL ?", n); err != nil {
			t.Fatal(err)
		}
	}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrConnLost) {
			t.Errorf("%s after the session was killed: %v; want an error matching mysql.ErrConnLost", what, err)
		}
	}

	c, err := db.q.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(id(c))
	_, err = c.Begin(ctx)
	lost("Conn.Begin", err)
	_, err = c.Exec(ctx, "SELECT 1")
	lost("Conn.Exec", err)
	_ = c.Discard()

	c, err = db.q.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill(id(tx))
	_, err = tx.Exec(ctx, "SELECT 1")
	lost("Transaction.Exec on a reserved connection", err)
	lost("Transaction.Commit on a reserved connection", tx.Commit(ctx))
	_ = c.Discard()

	for _, end := range []string{"Commit", "Rollback"} {
		tx, err = db.q.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		kill(id(tx))
		if end == "Commit" {
			lost("Transaction.Commit of the pool", tx.Commit(ctx))
		} else {
			_, err = tx.Query(ctx, "SELECT 1")
			lost("Transaction.Query of the pool", err)
			lost("Transaction.Rollback of the pool", tx.Rollback(ctx))
		}
	}
}
