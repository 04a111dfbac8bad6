package mysql

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// fakeClaim fails with err the first n times, then claims with the real claim.
type fakeClaim struct {
	n      int
	err    error
	real   driver.Claim
	onFail func()
}

func (f *fakeClaim) Claim(ctx context.Context, tx sqlqueue.Queryer, p driver.ClaimParams, dst []driver.Claimed) ([]driver.Claimed, error) {
	if f.n > 0 {
		f.n--
		// The failed attempt ran a statement of its own, as a deadlocked claim does.
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			return dst, err
		}
		if f.onFail != nil {
			f.onFail()
		}
		return append(dst, driver.Claimed{ID: -1}), f.err
	}
	return f.real.Claim(ctx, tx, p, dst)
}

func TestClaimRetriedAfterDeadlock(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO jobs (payload, grp) VALUES ('a', 'q'), ('b', 'q')"); err != nil {
		t.Fatal(err)
	}
	schema, err := driver.NewSchema(db.dialect, tb)
	if err != nil {
		t.Fatal(err)
	}
	realClaim, _ := db.dialect.RowLockClaim(schema)
	deadlock := &gomysql.MySQLError{Number: errDeadlock, Message: "Deadlock found when trying to get lock"}
	lockWait := &gomysql.MySQLError{Number: errLockWaitTimeout, Message: "Lock wait timeout exceeded"}
	p := driver.ClaimParams{Now: Epoch(), Limit: 10, Group: "q"}

	if _, err := db.Pool().ExecContext(ctx, "CREATE TABLE side (n INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		fails   int
		err     error
		before  string // a statement run in the transaction before the claim
		query   bool   // run it as a query
		meddle  string // run on another connection while the claim fails
		wantErr error
		side    int // rows in side afterwards
	}{
		{name: "deadlock twice", fails: 2, err: deadlock},
		{name: "lock wait timeout", fails: 1, err: lockWait},
		{name: "past the retries", fails: claimRetries + 1, err: deadlock, wantErr: deadlock},
		{name: "other error", fails: 1, err: errors.New("boom"), wantErr: errors.New("boom")},
		{name: "after a statement, replayed", fails: 1, err: deadlock, before: "INSERT INTO side VALUES (1)", side: 1},
		{name: "after a query", fails: 1, err: deadlock, before: "SELECT 1", query: true, wantErr: deadlock},
		{name: "replay matches other rows", fails: 1, err: deadlock, before: "DELETE FROM side WHERE n = 7",
			meddle: "INSERT INTO side VALUES (7)", wantErr: deadlock, side: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := db.Pool().ExecContext(ctx, "DELETE FROM side"); err != nil {
				t.Fatal(err)
			}
			tx, err := db.q.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			switch {
			case c.before != "" && c.query:
				rows, err := tx.Query(ctx, c.before)
				if err != nil {
					t.Fatal(err)
				}
				rows.Close()
			case c.before != "":
				if _, err := tx.Exec(ctx, c.before); err != nil {
					t.Fatal(err)
				}
			}
			fake := &fakeClaim{n: c.fails, err: c.err, real: realClaim.(retryingClaim).inner}
			if c.meddle != "" {
				fake.onFail = func() {
					if _, err := db.Pool().ExecContext(ctx, c.meddle); err != nil {
						t.Error(err)
					}
				}
			}
			got, err := retryingClaim{inner: fake, log: slog.New(slog.DiscardHandler)}.Claim(ctx, tx, p, nil)
			if c.wantErr != nil {
				if err == nil || !strings.Contains(err.Error(), c.wantErr.Error()) {
					t.Fatalf("Claim = %v, %v; want %v", got, err, c.wantErr)
				}
			} else {
				if err != nil || len(got) != 2 || got[0].ID < 1 || got[0].Attempt != 1 {
					t.Fatalf("Claim = %+v, %v; want both rows at attempt 1", got, err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("committing the restarted transaction: %v", err)
				}
			}
			var n int
			if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM side").Scan(&n); err != nil || n != c.side {
				t.Fatalf("side holds %d rows (%v); want %d", n, err, c.side)
			}
		})
	}
}

// Epoch is a fixed claim time for tests that claim without an App.
func Epoch() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
