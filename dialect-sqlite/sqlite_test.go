package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

func TestOpenRefuses(t *testing.T) {
	for _, c := range []struct {
		path string
		opts []Option
		want string
	}{
		{":memory:", nil, "file path"},
		{"", nil, "file path"},
		{"x.db", []Option{Synchronous("OFF")}, "Synchronous"},
		{"x.db", []Option{BusyTimeout(0)}, "BusyTimeout"},
		{"x.db", []Option{MaxOpenConns(-1)}, "MaxOpenConns"},
		{"x.db", []Option{nil}, "nil option"},
	} {
		p := c.path
		if p == "x.db" {
			p = filepath.Join(t.TempDir(), p)
		}
		if _, err := Open(context.Background(), p, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q): err = %v; want it to mention %q", c.path, err, c.want)
		}
	}
}

func TestOpenSettings(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), Synchronous(Normal), BusyTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	var sync, busy int
	if err := db.Pool().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v); want wal", mode, err)
	}
	if err := db.Pool().QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
		t.Errorf("synchronous = %d (%v); want 1 (NORMAL)", sync, err)
	}
	if err := db.Pool().QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 2000 {
		t.Errorf("busy_timeout = %d (%v); want 2000", busy, err)
	}
}

func TestAdvisoryKeysPerFile(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(context.Background(), filepath.Join(dir, "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(context.Background(), filepath.Join(dir, "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	c1, _ := a.Queue().Conn(ctx)
	defer c1.Close()
	c2, _ := a.Queue().Conn(ctx)
	defer c2.Close()
	c3, _ := b.Queue().Conn(ctx)
	defer c3.Close()
	if ok, _ := a.dialect.TryLock(ctx, c1, "k"); !ok {
		t.Fatal("first lock refused")
	}
	if ok, _ := a.dialect.TryLock(ctx, c2, "k"); ok {
		t.Error("a key held by one connection was taken by another")
	}
	if ok, _ := b.dialect.TryLock(ctx, c3, "k"); !ok {
		t.Error("keys of another database file collide")
	}
	_ = a.dialect.Unlock(ctx, c1, "k")
	if ok, _ := a.dialect.TryLock(ctx, c2, "k"); !ok {
		t.Error("an unlocked key could not be taken")
	}
	_ = a.dialect.Unlock(ctx, c2, "k")
	_ = b.dialect.Unlock(ctx, c3, "k")
}

func TestNewChecksThePool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(dsn string) *sql.DB {
		p, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	good := open("file:" + filepath.Join(dir, "good.db") + "?_txlock=immediate&_busy_timeout=5000&_journal_mode=WAL")
	db, err := New(ctx, good)
	if err != nil {
		t.Fatalf("New on an immediate pool with a busy timeout: %v", err)
	}
	if db.Path() != filepath.Join(dir, "good.db") {
		t.Errorf("Path = %q", db.Path())
	}
	if err := db.Close(); err != nil || good.PingContext(ctx) != nil {
		t.Errorf("Close of a DB made by New closed the caller's pool (%v)", err)
	}
	for _, c := range []struct {
		pool *sql.DB
		opts []Option
		want string
	}{
		{open("file:" + filepath.Join(dir, "deferred.db") + "?_busy_timeout=5000"), nil, "_txlock=immediate"},
		{open("file:" + filepath.Join(dir, "nobusy.db") + "?_txlock=immediate&_busy_timeout=0"), nil, "_busy_timeout"},
		{open(":memory:"), nil, "in memory"},
		{good, []Option{Synchronous(Normal)}, "sqlite.Synchronous"},
		{good, []Option{MaxOpenConns(3)}, "sqlite.MaxOpenConns"},
		{good, []Option{WithLogger(nil)}, "WithLogger(nil)"},
		{nil, nil, "nil *sql.DB"},
	} {
		if _, err := New(ctx, c.pool, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: err = %v; want it to mention %q", err, c.want)
		}
	}
}

// TestCanonicalTable: every spelling SQLite resolves to one table names it the same way.
func TestCanonicalTable(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(ctx, sqlqueue.StandardTable("Jobs")); err != nil {
		t.Fatal(err)
	}
	want := sqlqueue.TableRef{Schema: "main", Name: "Jobs"}
	for _, ref := range []sqlqueue.TableRef{{Name: "Jobs"}, {Name: "jobs"}, {Schema: "MAIN", Name: "JOBS"}, {Schema: "main", Name: "Jobs"}} {
		got, err := db.dialect.CanonicalTable(ctx, db.Queue(), ref)
		if err != nil || got != want {
			t.Errorf("CanonicalTable(%v) = %v, %v; want %v", ref, got, err, want)
		}
	}
	if _, err := db.dialect.CanonicalTable(ctx, db.Queue(), sqlqueue.TableRef{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("CanonicalTable of a missing table: %v", err)
	}
}

// TestCreatedAtDefaultIsTimeFormat: a row inserted without created_at gets the current time in
// TimeFormat, fixed-width microseconds like every time the engine writes (the default wrote
// milliseconds, which order wrongly against microsecond text: "…00.5Z" > "…00.500001Z").
func TestCreatedAtDefaultIsTimeFormat(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(ctx, sqlqueue.StandardTable("jobs")); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := db.Pool().ExecContext(ctx, `INSERT INTO jobs (payload, grp) VALUES (x'00', 'q')`); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := db.Pool().QueryRowContext(ctx, `SELECT created_at FROM jobs`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	at, err := ParseTime(s)
	if err != nil || len(s) != len(TimeFormat) {
		t.Fatalf("created_at default %q is not in TimeFormat %q: %v", s, TimeFormat, err)
	}
	if at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("created_at default %v is not the insert's time (after %v)", at, before)
	}
}
