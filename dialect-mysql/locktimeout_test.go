package mysql

import (
	"context"
	"errors"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// sessionCount reads a counter of the session's status on the pool's only connection.
func sessionCount(t *testing.T, db *DB, name string) int64 {
	t.Helper()
	var k string
	var v int64
	if err := db.Pool().QueryRow("SHOW SESSION STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLockTimeoutCarriedPerStatement runs the statements of a lease cycle (the lock timeout the
// engine sets at the start of a bounded transaction, the fenced DELETE, the claim's SELECT and
// stamp) in an engine transaction on MariaDB: the lock timeout must reach the server with each
// statement, not as a statement of its own (a round trip of each lease cycle), and must leave
// the session's setting as it was.
func TestLockTimeoutCarriedPerStatement(t *testing.T) {
	db := openDB(t, mariadbServer(t))
	ctx := context.Background()
	db.Pool().SetMaxOpenConns(1) // every statement below runs on the one session
	if _, err := db.Pool().ExecContext(ctx, "CREATE TABLE q (id BIGINT PRIMARY KEY, locked_until DATETIME(6) NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO q (id) VALUES (1), (2), (3), (4)"); err != nil {
		t.Fatal(err)
	}
	sets := sessionCount(t, db, "Com_set_option")
	tx, err := db.Queue().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, db.dialect.LockTimeout(2*time.Second, false)); err != nil {
		t.Fatal(err)
	}
	if r, err := tx.Exec(ctx, "DELETE `q` FROM `q` FORCE INDEX (PRIMARY) WHERE `locked_until` IS NULL AND `id` IN (?, ?)", 1, 2); err != nil || r.RowsAffected != 2 {
		t.Fatalf("DELETE: %+v, %v", r, err)
	}
	rows, err := tx.Query(ctx, "SELECT `id`, @@innodb_lock_wait_timeout FROM `q` ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED", 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var id, wait int64
		if err := rows.Scan(&id, &wait); err != nil {
			t.Fatal(err)
		}
		if wait != 2 {
			t.Errorf("row %d read with innodb_lock_wait_timeout = %d, want the engine's 2", id, wait)
		}
		got = append(got, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("claimed %v, want [3 4]", got)
	}
	if r, err := tx.Exec(ctx, "UPDATE `q` FORCE INDEX (PRIMARY) SET `locked_until` = NOW(6) WHERE `id` IN (?, ?)", 3, 4); err != nil || r.RowsAffected != 2 {
		t.Fatalf("UPDATE: %+v, %v", r, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sessionCount(t, db, "Com_set_option") - sets; n != 0 {
		t.Errorf("the bounded transaction sent %d SET statements; want the lock timeout carried by its statements", n)
	}
	var wait int64
	if err := db.Pool().QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if wait == 2 {
		t.Errorf("the session keeps the transaction's lock timeout (2) after it")
	}
}

// TestLockTimeoutCarriedPerStatementBounds holds a row in another session and settles it in an
// engine transaction bounded to one second on MariaDB, with a statement that carries the bound
// and with one that cannot (it opens with a comment, so the session's setting is sent first):
// both must give up after about a second with a lock wait timeout, not the server's 50.
func TestLockTimeoutCarriedPerStatementBounds(t *testing.T) {
	db := openDB(t, mariadbServer(t))
	ctx := context.Background()
	if _, err := db.Pool().ExecContext(ctx, "CREATE TABLE q (id BIGINT PRIMARY KEY, locked_until DATETIME(6) NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO q (id) VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Pool().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT id FROM q WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"DELETE `q` FROM `q` FORCE INDEX (PRIMARY) WHERE `locked_until` IS NULL AND `id` IN (?)",
		"/* custom */ DELETE FROM `q` WHERE `id` = ?",
	} {
		tx, err := db.Queue().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, db.dialect.LockTimeout(time.Second, false)); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		_, err = tx.Exec(sctx, stmt, 1)
		took := time.Since(start)
		cancel()
		_ = tx.Rollback(ctx)
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1205 || took > 5*time.Second {
			t.Errorf("%s on a held row: %v after %v; want error 1205 after about a second", stmt, err, took.Round(time.Millisecond))
		}
	}
}
