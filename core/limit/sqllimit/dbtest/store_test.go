package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/limit/sqllimit"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// opened is a database the store runs on.
type opened struct {
	db    sqlqueue.DB
	d     sqlqueue.Dialect
	close func()
}

func servers() map[string]func(t *testing.T) opened {
	return map[string]func(t *testing.T) opened{
		"sqlite": func(t *testing.T) opened {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "limits.db"))
			if err != nil {
				t.Fatalf("sqlite.Open: %v", err)
			}
			return opened{db.Queue(), db.Dialect(), func() { _ = db.Close() }}
		},
		"postgres": func(t *testing.T) opened {
			url := coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			db, err := postgres.Open(context.Background(), url)
			if err == nil {
				err = db.Start(context.Background())
			}
			if err != nil {
				coretest.ServerUnavailable(t, "PostgreSQL", url, err)
			}
			return opened{db.Queue(), db.Dialect(), func() { _ = db.Close() }}
		},
		"mariadb": func(t *testing.T) opened {
			return openMySQL(t, "MariaDB", coretest.Env("SETTLE_TEST_MARIADB_URL", "root@tcp(127.0.0.1:3306)/test?parseTime=true"))
		},
		"mysql": func(t *testing.T) opened {
			dsn := os.Getenv("SETTLE_TEST_MYSQL_URL")
			if dsn == "" {
				t.Skip("SETTLE_TEST_MYSQL_URL is not set: no MySQL 8 server to run on (not required)")
			}
			return openMySQL(t, "MySQL", dsn)
		},
	}
}

func openMySQL(t *testing.T, what, dsn string) opened {
	db, err := mysql.Open(context.Background(), dsn)
	if err != nil {
		coretest.ServerUnavailable(t, what, dsn, err)
	}
	return opened{db.Queue(), db.Dialect(), func() { _ = db.Close() }}
}

// newStore creates a store with tables of its own, dropped when the test ends.
func newStore(t *testing.T, o opened) *sqllimit.Store {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "lim_" + hex.EncodeToString(b[:])
	s, err := sqllimit.New(o.db, o.d, sqllimit.Prefix(prefix))
	if err != nil {
		t.Fatalf("sqllimit.New: %v", err)
	}
	if err := s.Create(context.Background()); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		for _, suffix := range []string{"_slots", "_rates", "_pauses"} {
			_, _ = o.db.Exec(context.Background(), "DROP TABLE "+o.d.Quote(prefix+suffix))
		}
		o.close()
	})
	return s
}

func each(t *testing.T, f func(t *testing.T, s *sqllimit.Store)) {
	for name, open := range servers() {
		t.Run(name, func(t *testing.T) { f(t, newStore(t, open(t))) })
	}
}

func TestConcurrencyProof(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) { coretest.ConcurrencyProof(t, s, "conc", 200) })
}

func TestRateProof(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) { coretest.RateProof(t, s, "rate") })
}

func TestPauseProof(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) { coretest.PauseProof(t, s) })
}

// A process killed while holding a slot keeps it no longer than the lease.
func TestSlotOfADeadProcessFreesAtItsLease(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) {
		ctx := context.Background()
		t0 := coretest.Epoch
		take := func(holder string, at time.Time) bool {
			ok, err := s.AcquireSlot(ctx, "k", 2, holder, at, 10*time.Second)
			if err != nil {
				t.Fatalf("AcquireSlot: %v", err)
			}
			return ok
		}
		if !take("dead-1", t0) || !take("dead-2", t0) {
			t.Fatal("two free slots were not given")
		}
		if take("live", t0.Add(9*time.Second)) {
			t.Fatal("a third holder got a slot while both leases run")
		}
		if err := s.RenewSlot(ctx, "k", "dead-2", t0.Add(5*time.Second), 10*time.Second); err != nil {
			t.Fatalf("RenewSlot: %v", err)
		}
		if !take("live", t0.Add(10*time.Second)) {
			t.Fatal("the slot of a holder that stopped renewing was not free at its lease's end")
		}
		if take("other", t0.Add(14*time.Second)) {
			t.Fatal("the renewed slot was taken before its renewed lease ended")
		}
		if err := s.ReleaseSlot(ctx, "k", "live"); err != nil {
			t.Fatalf("ReleaseSlot: %v", err)
		}
		if !take("other", t0.Add(14*time.Second)) {
			t.Fatal("a released slot was not free")
		}
	})
}

func TestTokensFollowTheCellRate(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) {
		ctx := context.Background()
		t0 := coretest.Epoch
		iv := 100 * time.Millisecond
		for i := range 3 {
			if w, err := s.TakeToken(ctx, "k", t0, iv, 3); err != nil || w != 0 {
				t.Fatalf("token %d of the burst: wait %v, err %v", i, w, err)
			}
		}
		if w, err := s.TakeToken(ctx, "k", t0, iv, 3); err != nil || w != iv {
			t.Fatalf("past the burst: wait %v (err %v), want %v", w, err, iv)
		}
		if w, _ := s.TakeToken(ctx, "k", t0.Add(iv), iv, 3); w != 0 {
			t.Fatalf("after one interval: wait %v, want a token", w)
		}
		if err := s.Backoff(ctx, "k", t0.Add(time.Minute), iv, 3); err != nil {
			t.Fatalf("Backoff: %v", err)
		}
		if w, _ := s.TakeToken(ctx, "k", t0.Add(30*time.Second), iv, 3); w != 30*time.Second {
			t.Fatalf("during a backoff: wait %v, want 30s", w)
		}
		if w, _ := s.TakeToken(ctx, "k", t0.Add(time.Minute), iv, 3); w != 0 {
			t.Fatalf("at the backoff's end: wait %v, want a token", w)
		}
		if w, _ := s.TakeToken(ctx, "k", t0.Add(time.Minute), iv, 3); w != iv {
			t.Fatalf("right after a backoff: wait %v, want %v (no burst)", w, iv)
		}
		if w, _ := s.TakeToken(ctx, "other", t0, iv, 3); w != 0 {
			t.Fatalf("another key: wait %v, want a token", w)
		}
	})
}

func TestNewRefusesWhatItCannotSpeak(t *testing.T) {
	open := servers()["sqlite"](t)
	defer open.close()
	if _, err := sqllimit.New(open.db, open.d, sqllimit.Prefix("1bad")); err == nil {
		t.Error("a prefix that is not an identifier was accepted")
	}
	if _, err := sqllimit.New(nil, open.d); err == nil {
		t.Error("a nil database was accepted")
	}
}

var _ core.LimitStore = (*sqllimit.Store)(nil)

func TestPerKeyRateProof(t *testing.T) {
	each(t, func(t *testing.T, s *sqllimit.Store) { coretest.PerKeyRateProof(t, s, "per-key") })
}
