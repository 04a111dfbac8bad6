package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/periodic"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
	"github.com/settlehq/settle/dialect-postgres"
	"github.com/settlehq/settle/dialect-sqlite"
)

// database opens one process's own connection pool to the shared database.
type database func(t *testing.T, c clock.Clock) (sqlqueue.Dialect, sqlqueue.DB)

type beat struct {
	Tick time.Time `json:"tick"`
}

// TestThreeProcessesOnSQLite and TestThreeProcessesOnPostgres: three schedulers, each with its
// own pool on one database, claim the ticks of an every-second job for 60 virtual seconds while
// they stop and start (never all at once): the tick table holds each tick once, the target
// received each tick once, and no tick is missing.
func TestThreeProcessesOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ticks.db")
	trial(t, func(t *testing.T, c clock.Clock) (sqlqueue.Dialect, sqlqueue.DB) {
		db, err := sqlite.Open(context.Background(), path, sqlite.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db.Dialect(), db.Queue()
	})
}

var seq atomic.Int64

func TestThreeProcessesOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		coretest.ServerUnavailable(t, "PostgreSQL", url+" (SETTLE_TEST_PG_URL)", err)
	}
	schema := fmt.Sprintf("periodic_%d_%d", time.Now().UnixNano()%1e9, seq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	trial(t, func(t *testing.T, c clock.Clock) (sqlqueue.Dialect, sqlqueue.DB) {
		db, err := postgres.Open(ctx, url+"&search_path="+schema, postgres.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db.Dialect(), db.Queue()
	})
}

func TestThreeProcessesOnMariaDB(t *testing.T) {
	ctx := context.Background()
	dsn := coretest.Env("SETTLE_TEST_MARIADB_URL", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
	threeOnMySQL(t, ctx, dsn, "MariaDB", func(err error) { coretest.ServerUnavailable(t, "MariaDB", dsn+" (SETTLE_TEST_MARIADB_URL)", err) })
}

// TestThreeProcessesOnMySQL runs on a MySQL 8 server named by SETTLE_TEST_MYSQL_URL, and skips
// without one (none is installed in CI; not a failure under SETTLE_REQUIRE_SERVERS=1).
func TestThreeProcessesOnMySQL(t *testing.T) {
	dsn := os.Getenv("SETTLE_TEST_MYSQL_URL")
	if dsn == "" {
		t.Skip("SETTLE_TEST_MYSQL_URL is not set: no MySQL 8 server to run on")
	}
	threeOnMySQL(t, context.Background(), dsn, "MySQL", func(err error) { coretest.ServerUnavailable(t, "MySQL", "SETTLE_TEST_MYSQL_URL", err) })
}

func threeOnMySQL(t *testing.T, ctx context.Context, dsn, what string, unavailable func(error)) {
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s DSN %q: %v", what, dsn, err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(err)
	}
	name := fmt.Sprintf("settle_periodic_%d_%d", time.Now().UnixNano()%1e9, seq.Add(1))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name) })
	cfg.DBName, cfg.ParseTime, cfg.Loc = name, true, time.UTC
	trial(t, func(t *testing.T, c clock.Clock) (sqlqueue.Dialect, sqlqueue.DB) {
		db, err := mysql.Open(ctx, cfg.FormatDSN(), mysql.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db.Dialect(), db.Queue()
	})
}

func trial(t *testing.T, open database) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*coretest.WaitTimeout)
	defer cancel()
	start := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	broker := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer broker.Close()
	d, db := open(t, v)
	ddl, err := periodic.DDL(d, "ticks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	every, _ := periodic.Every(time.Second)
	process := func() *periodic.Scheduler {
		pd, pdb := open(t, v)
		claims, err := periodic.NewSQLClaims(pd, pdb, "ticks", v)
		if err != nil {
			t.Fatal(err)
		}
		s, err := periodic.New(claims, periodic.WithClock(v))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := core.NewPublisher[beat](broker.Queue("beats"))
		if err := periodic.Add(s, "beat", every, pub, func(_ context.Context, tk periodic.Tick) (beat, error) {
			return beat{Tick: tk.At}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var procs [3]*periodic.Scheduler
	for i := range procs {
		procs[i] = process()
	}
	// second → processes that stop (-n) or start (+n) before that second's tick
	plan := map[int][]int{8: {-1}, 12: {+1}, 20: {-2, -3}, 23: {+2}, 30: {-1}, 31: {+3}, 44: {-2}, 45: {+1, +2}, 52: {-3}, 56: {+3}}
	for sec := 1; sec <= 60; sec++ {
		alive := 0
		for _, p := range plan[sec] {
			if i := p - 1; p > 0 {
				procs[i] = process()
			} else {
				i = -p - 1
				procs[i].Close()
				procs[i] = nil
			}
		}
		for _, p := range procs {
			if p != nil {
				alive++
			}
		}
		// Each running scheduler waits on its job's tick and on its hourly prune.
		if err := v.BlockUntil(ctx, 2*alive); err != nil {
			t.Fatalf("second %d: the %d schedulers never waited on the clock: %v", sec, alive, err)
		}
		v.Advance(time.Second)
	}
	if err := v.BlockUntil(ctx, 2*3); err != nil {
		t.Fatal(err)
	}

	checkTicks(t, ctx, db, start, broker.Messages("beats"))
	claims, err := periodic.NewSQLClaims(d, db, "ticks", v)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := claims.PruneTicks(ctx, start.Add(30*time.Second)); err != nil || n != 29 {
		t.Errorf("PruneTicks before the 30th tick: %d rows, %v; want 29", n, err)
	}
}

// checkTicks: the tick table holds each of the 60 ticks once, and the target received each
// tick's message once, in order.
func checkTicks(t *testing.T, ctx context.Context, db sqlqueue.DB, start time.Time, got []coretest.Stored) {
	t.Helper()
	rows, err := db.Query(ctx, "SELECT tick FROM ticks WHERE schedule = 'beat' ORDER BY tick")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ticks []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, s)
	}
	if len(ticks) != 60 || len(got) != 60 {
		t.Fatalf("%d claimed ticks and %d messages in 60 s, want 60 of each", len(ticks), len(got))
	}
	for i := range 60 {
		at := start.Add(time.Duration(i+1) * time.Second)
		if want := at.Format("2006-01-02T15:04:05Z"); ticks[i] != want {
			t.Fatalf("claimed tick %d is %s, want %s", i+1, ticks[i], want)
		}
		if want := periodic.TickID("beat", at); got[i].ID != want {
			t.Fatalf("message %d is %s, want %s", i+1, got[i].ID, want)
		}
	}
}
