package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// openDB opens a DB on a fresh database of s, closed when t ends.
func openDB(t testing.TB, s testServer, opts ...Option) *DB {
	t.Helper()
	dsn, _ := s.freshDatabase(t)
	db, err := Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenSetsUpSessions(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		if db.Version().Flavour.String() != s.name || db.dialect.Name() != s.name {
			t.Fatalf("flavour %v, dialect %q; want %s", db.Version(), db.dialect.Name(), s.name)
		}
		tx, err := db.q.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		rows, err := tx.Query(ctx, "SELECT @@"+isolationVar(db.Version().Flavour))
		if err != nil {
			t.Fatal(err)
		}
		var iso string
		if err := scanOne(rows, &iso); err != nil {
			t.Fatal(err)
		}
		if iso != "READ-COMMITTED" {
			t.Fatalf("claim transactions run at %s, want READ-COMMITTED", iso)
		}
		if _, ok := tx.Unwrap().(*sql.Tx); !ok {
			t.Fatalf("Unwrap() = %T, want *sql.Tx", tx.Unwrap())
		}
	})
}

func TestNewAsksForIsolationPerTransaction(t *testing.T) {
	s := mariadbServer(t)
	dsn, _ := s.freshDatabase(t)
	ctx := context.Background()
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := New(ctx, plain); err == nil || !strings.Contains(err.Error(), "clientFoundRows=true") {
		t.Fatalf("New on a pool counting changed rows = %v, want an error asking for clientFoundRows=true", err)
	}
	pool, err := sql.Open("mysql", dsn+"&clientFoundRows=true") // the server's default level: REPEATABLE READ
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.ExecContext(ctx, "CREATE TABLE iso (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.ExecContext(ctx, "INSERT INTO iso VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	read := func(q sqlqueue.Queryer) int {
		rows, err := q.Query(ctx, "SELECT v FROM iso WHERE id = 1")
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if err := scanOne(rows, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		level sql.IsolationLevel
		sees  int // what the second read of the transaction sees after a concurrent commit
	}{{sql.LevelReadCommitted, 1}, {sql.LevelRepeatableRead, 0}} {
		if _, err := pool.ExecContext(ctx, "UPDATE iso SET v = 0"); err != nil {
			t.Fatal(err)
		}
		db, err := New(ctx, pool, Isolation(c.level))
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.q.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read(tx)
		if _, err := pool.ExecContext(ctx, "UPDATE iso SET v = 1"); err != nil {
			t.Fatal(err)
		}
		if got := read(tx); got != c.sees {
			t.Errorf("%v: second read saw %d, want %d", c.level, got, c.sees)
		}
		tx.Rollback(ctx)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.PingContext(ctx); err != nil {
		t.Fatalf("Close closed the caller's pool: %v", err)
	}
	if _, err := New(ctx, pool, Isolation(sql.LevelReadUncommitted)); err == nil || !strings.Contains(err.Error(), "Isolation") {
		t.Fatalf("Isolation(ReadUncommitted) = %v, want an error naming the option", err)
	}
}

func TestColumnsFromCatalogue(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		if _, err := db.q.Exec(ctx, `CREATE TABLE kinds (
			id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, grp VARCHAR(100), attempt INT,
			retry_after DATETIME(6), locked_until DATETIME, headers JSON, created_at TIMESTAMP(3) NULL, price DECIMAL(10,2), flag BOOLEAN, state ENUM('a', 'b'), day DATE)`); err != nil {
			t.Fatal(err)
		}
		cols, err := readColumns(ctx, db.q, sqlqueue.TableRef{Name: "kinds"})
		if err != nil {
			t.Fatal(err)
		}
		jsonKind := driver.KindJSON
		if db.Version().Flavour == MariaDB {
			jsonKind = driver.KindText // MariaDB's JSON is LONGTEXT with a json_valid check
		}
		want := []struct {
			name string
			kind driver.ColumnKind
			prec int
		}{{"id", driver.KindInteger, 0}, {"payload", driver.KindBytes, 0}, {"grp", driver.KindText, 0},
			{"attempt", driver.KindInteger, 0}, {"retry_after", driver.KindTime, 6}, {"locked_until", driver.KindTime, 0},
			{"headers", jsonKind, 0}, {"created_at", driver.KindTime, 3}, {"price", driver.KindFloat, 0},
			{"flag", driver.KindBool, 0}, {"state", driver.KindUnknown, 0}, {"day", driver.KindOther, 0}}
		if len(cols) != len(want) {
			t.Fatalf("got %d columns: %+v", len(cols), cols)
		}
		for i, w := range want {
			c := cols[i]
			if c.Name != w.name || c.Kind != w.kind || c.precision != w.prec {
				t.Errorf("column %d = %s %s (%v, precision %d); want %s (%v, precision %d)", i, c.Name, c.Type, c.Kind, c.precision, w.name, w.kind, w.prec)
			}
		}
		for _, ref := range []sqlqueue.TableRef{{Name: "missing"}, {Schema: db.Database(), Name: "KINDS_missing"}} {
			cols, err := db.dialect.Columns(ctx, db.q, ref)
			if err != nil || len(cols) != 0 {
				t.Fatalf("Columns(%v) = %v, %v; want none", ref, cols, err)
			}
		}
		cols2, err := db.dialect.Columns(ctx, db.q, sqlqueue.TableRef{Schema: db.Database(), Name: "kinds"})
		if err != nil || len(cols2) != len(want) {
			t.Fatalf("schema-qualified Columns = %v, %v", cols2, err)
		}
	})
}

// TestTimeTokenComparesExactly writes a microsecond token through the dialect and finds the row
// again with it: what the lease form's fenced statements rely on.
func TestTimeTokenComparesExactly(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		if _, err := db.q.Exec(ctx, "CREATE TABLE tok (id INT PRIMARY KEY, locked_until DATETIME(6))"); err != nil {
			t.Fatal(err)
		}
		base := time.Date(2026, 11, 30, 1, 2, 3, 0, time.FixedZone("X", 3*3600))
		for i, ns := range []int{0, 1000, 999999000, 123456789, 500} {
			tok := base.Add(time.Duration(ns))
			if _, err := db.q.Exec(ctx, "INSERT INTO tok VALUES (?, ?)", i, db.dialect.Time(tok)); err != nil {
				t.Fatal(err)
			}
			res, err := db.q.Exec(ctx, "UPDATE tok SET locked_until = NULL WHERE id = ? AND locked_until = ?", i, db.dialect.Time(tok))
			if err != nil || res.RowsAffected != 1 {
				t.Fatalf("token %v (ns %d): fenced update matched %d rows, %v", tok, ns, res.RowsAffected, err)
			}
		}
		a, b := db.dialect.Time(base).(time.Time), db.dialect.Time(base.Add(time.Microsecond)).(time.Time)
		if !a.Before(b) {
			t.Fatal("stored times do not order as the times do")
		}
	})
}

func TestAdvisoryLocks(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		other := openDB(t, s) // another database on the same server
		c1, err := db.q.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		c2, err := db.q.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		c3, err := other.q.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c3.Close()
		// Keys as the engine names them: the table as the catalogue identifies it, then the key.
		prefix, otherPrefix := db.Database()+".jobs:", other.Database()+".jobs:"
		long := prefix + strings.Repeat("k", 100)
		for _, key := range []string{prefix + "7", long} {
			if ok, err := db.dialect.TryLock(ctx, c1, key); err != nil || !ok {
				t.Fatalf("TryLock(%q) on a free key = %v, %v", key, ok, err)
			}
			if ok, err := db.dialect.TryLock(ctx, c2, key); err != nil || ok {
				t.Fatalf("TryLock(%q) held by another connection = %v, %v; want false", key, ok, err)
			}
			okey := otherPrefix + strings.TrimPrefix(key, prefix)
			if ok, err := other.dialect.TryLock(ctx, c3, okey); err != nil || !ok {
				t.Fatalf("TryLock(%q) of a table in another database = %v, %v; want true (keys carry the database)", okey, ok, err)
			}
			if err := other.dialect.Unlock(ctx, c3, okey); err != nil {
				t.Fatal(err)
			}
		}
		// The claim's candidate filter sees which keys are taken.
		var free []int
		rows, err := db.q.Query(ctx, "SELECT k FROM (SELECT 7 AS k UNION ALL SELECT 8) AS c WHERE IS_USED_LOCK("+lockNameSQL(prefix, "CAST(c.k AS CHAR)")+") IS NULL")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k int
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			free = append(free, k)
		}
		rows.Close()
		if len(free) != 1 || free[0] != 8 {
			t.Fatalf("free keys = %v, want [8]", free)
		}
		for _, key := range []string{prefix + "7", long} {
			if err := db.dialect.Unlock(ctx, c1, key); err != nil {
				t.Fatal(err)
			}
			if ok, err := db.dialect.TryLock(ctx, c2, key); err != nil || !ok {
				t.Fatalf("TryLock(%q) after unlock = %v, %v", key, ok, err)
			}
		}
		// c1 does not hold "7" (c2 does): the release is not confirmed, c1 is closed for good,
		// and the lock c2 holds is untouched.
		err = db.dialect.Unlock(ctx, c1, prefix+"7")
		if !errors.Is(err, ErrUnlockUnconfirmed) || !strings.Contains(err.Error(), "returned 0") {
			t.Fatalf("Unlock of a lock held elsewhere = %v, want ErrUnlockUnconfirmed", err)
		}
		if _, err := c1.Exec(ctx, "SELECT 1"); err == nil {
			t.Fatal("the connection of an unconfirmed release is still usable")
		}
		if ok, err := db.dialect.TryLock(ctx, c1, "9"); err == nil || ok {
			t.Fatalf("TryLock on a discarded connection = %v, %v", ok, err)
		}
		if err := db.dialect.Unlock(ctx, c2, "never-taken"); !errors.Is(err, ErrUnlockUnconfirmed) || !strings.Contains(err.Error(), "NULL") {
			t.Fatalf("Unlock of a lock nobody holds = %v", err)
		}
	})
}

func TestIsTransient(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	if _, err := db.q.Exec(ctx, "CREATE TABLE dl (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.q.Exec(ctx, "INSERT INTO dl VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	// Two transactions lock 1 and 2 in opposite orders: InnoDB kills one with 1213.
	t1, _ := db.q.Begin(ctx)
	t2, _ := db.q.Begin(ctx)
	defer t1.Rollback(ctx)
	defer t2.Rollback(ctx)
	if _, err := t1.Exec(ctx, "UPDATE dl SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := t2.Exec(ctx, "UPDATE dl SET v = 2 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		_, err := t1.Exec(ctx, "UPDATE dl SET v = 1 WHERE id = 2")
		errs <- err
	}()
	_, err2 := t2.Exec(ctx, "UPDATE dl SET v = 2 WHERE id = 1")
	if err2 != nil {
		t2.Rollback(ctx)
	}
	err1 := <-errs
	dead := err1
	if dead == nil {
		dead = err2
	}
	if !IsTransient(dead) {
		t.Fatalf("deadlock error %v is not IsTransient", dead)
	}
	if IsTransient(errors.New("other")) || IsTransient(nil) {
		t.Fatal("IsTransient of a plain error")
	}
}

func TestOpenRefusals(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	cfg, err := gomysql.ParseDSN(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	if _, err := Open(ctx, cfg.FormatDSN()); err == nil || !strings.Contains(err.Error(), "no current database") {
		t.Fatalf("Open without a database = %v; want a refusal naming the missing database", err)
	}
	if _, err := Open(ctx, "not a dsn"); err == nil {
		t.Fatal("Open accepted a malformed DSN")
	}
	if _, err := Open(ctx, s.dsn, Isolation(sql.LevelSnapshot)); err == nil || !strings.Contains(err.Error(), "Isolation") {
		t.Fatalf("Open with Isolation(Snapshot) = %v; want an error naming the option", err)
	}
}
