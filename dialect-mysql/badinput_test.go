package mysql

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// openErr opens the endpoint for one subscription and returns the start-up error.
func openErr(t *testing.T, ep core.Endpoint) error {
	t.Helper()
	src, _, err := ep.Open(context.Background(), core.Subscription{Name: "q", Options: &core.Options{Workers: 1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		src.Close()
	}
	return err
}

func TestBadTables(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	exec := func(q string) {
		t.Helper()
		if _, err := db.Pool().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	lease := sqlqueue.Table{Name: "coarse", Columns: sqlqueue.Columns{Attempt: "attempt", LockedUntil: "locked_until"}}
	exec("CREATE TABLE coarse (id BIGINT PRIMARY KEY AUTO_INCREMENT, payload BLOB, attempt INT NOT NULL DEFAULT 0, locked_until DATETIME)")
	exec("CREATE TABLE keyed (id BIGINT NOT NULL, n INT NOT NULL, payload BLOB, PRIMARY KEY (n, id))")
	exec("CREATE TABLE delays (id BIGINT PRIMARY KEY AUTO_INCREMENT, payload BLOB, retry_after TIMESTAMP(3) NULL)")

	var ce *sqlqueue.ColumnError
	ep, err := Lease(db, lease, "")
	if err != nil {
		t.Fatal(err)
	}
	err = openErr(t, ep)
	if !errors.As(err, &ce) || ce.Column != "locked_until" || !strings.Contains(err.Error(), "coarse") || !strings.Contains(err.Error(), "DATETIME(6)") {
		t.Fatalf("lease on a DATETIME locked_until: %v; want a ColumnError naming coarse.locked_until and DATETIME(6)", err)
	}
	// The row-lock form does not use locked_until: the same table is fine for it.
	ep, _ = RowLock(db, lease, "")
	if err := openErr(t, ep); err != nil {
		t.Fatalf("row lock on the same table: %v", err)
	}
	ep, _ = RowLock(db, sqlqueue.Table{Name: "keyed"}, "")
	if err := openErr(t, ep); !errors.As(err, &ce) || ce.Column != "id" || !strings.Contains(err.Error(), "primary key") {
		t.Fatalf("table keyed by (n, id): %v; want a ColumnError on id naming the primary key", err)
	}
	ep, _ = Advisory(db, sqlqueue.Table{Name: "delays", Columns: sqlqueue.Columns{RetryAfter: "retry_after"}}, "")
	if err := openErr(t, ep); !errors.As(err, &ce) || ce.Column != "retry_after" || !strings.Contains(err.Error(), "early") {
		t.Fatalf("retry_after TIMESTAMP(3): %v; want a ColumnError on retry_after", err)
	}

	db.Pool().SetMaxOpenConns(3)
	ep, _ = Advisory(db, sqlqueue.Table{Name: "coarse"}, "")
	_, _, err = ep.Open(ctx, core.Subscription{Name: "small", Options: &core.Options{Workers: 3},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "needs 4 connections") || !strings.Contains(err.Error(), "allows 3") {
		t.Fatalf("advisory with 3 workers on a pool of 3: %v; want a refusal naming both numbers", err)
	}
	db.Pool().SetMaxOpenConns(0)

	long := strings.Repeat("t", 65)
	for _, tb := range []sqlqueue.Table{{Name: long}, {Name: "q", Columns: sqlqueue.Columns{Attempt: long}}, {Schema: long, Name: "q"}} {
		for name, mk := range map[string]func(*DB, sqlqueue.Table, string) (core.Endpoint, error){"lease": Lease, "rowlock": RowLock, "advisory": Advisory} {
			if _, err := mk(db, tb, ""); err == nil || !strings.Contains(err.Error(), "65 characters") || !strings.Contains(err.Error(), "at most 64") {
				t.Errorf("%s on %+v: %v; want a refusal naming the 64-character limit", name, tb, err)
			}
		}
		if _, err := TableDDL(tb); err == nil {
			t.Errorf("TableDDL(%+v) accepted a 65-character identifier", tb)
		}
	}
}

// TestConnectionDroppedMidFlight kills, on the server, the connection that holds a row-lock
// claim while its handler works: the settlement fails with a clear error, the row comes back
// and is settled on the next claim, and no connection is left checked out.
func TestConnectionDroppedMidFlight(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(db, tb, "q")
	if err != nil {
		t.Fatal(err)
	}
	id, err := sqlqueue.Publish(ctx, pub, "hello")
	if err != nil {
		t.Fatal(err)
	}
	rec := coretest.NewRecorder(t)
	app := core.New(core.WithoutSignals(), core.WithObserver(rec.Observe), core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ep, err := RowLock(db, tb, "q")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan int, 2)
	release := make(chan struct{})
	var calls atomic.Int32
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[string]) error {
		entered <- m.Attempt()
		if calls.Add(1) == 1 {
			<-release
		}
		return nil
	}, sqlqueue.PollInterval(10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	if got := <-entered; got != 1 {
		t.Fatalf("first attempt = %d", got)
	}
	var thread int64
	// The claim's transaction is the one open on this test's own database: other tests (and
	// other test processes) share the server, and their transactions must not be the one killed.
	if err := db.Pool().QueryRowContext(ctx, "SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t"+
		" JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE()").Scan(&thread); err != nil {
		t.Fatalf("finding the claim's connection: %v", err)
	}
	if _, err := db.Pool().ExecContext(ctx, "KILL ?", thread); err != nil {
		t.Fatal(err)
	}
	close(release)
	first := rec.WaitSettled(1)[0]
	if !errors.Is(first.Err, ErrConnLost) {
		t.Fatalf("the settlement on a killed connection: %v; want ErrConnLost", first.Err)
	}
	t.Logf("settlement on the killed connection: %v", first.Err)
	// The killed claim's transaction rolled back, attempt bump included; the engine then held
	// the row back for its failure backoff, counting the attempt the rollback undid.
	if got := <-entered; got != 2 {
		t.Fatalf("redelivery attempt = %d; want 2 (a failed settlement's attempt still counts)", got)
	}
	settled := rec.WaitSettled(2)
	if settled[1].Err != nil || settled[1].Delivery.ID() != first.Delivery.ID() {
		t.Fatalf("second settlement = %+v", settled[1])
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs WHERE id = ? AND processed_at IS NULL", id).Scan(&left); err != nil || left != 0 {
		t.Fatalf("row %d left unprocessed: %d, %v", id, left, err)
	}
	if st := db.Pool().Stats(); st.InUse != 0 {
		t.Fatalf("%d connections still checked out after the App stopped", st.InUse)
	}
}

// TestSixtyFourCharacterTable: MySQL and MariaDB allow 64-character identifiers, and so does
// settle (it refused them with "at most 63 bytes" while its own message said 64): a table with
// a 64-character name is created, published to and drained.
func TestSixtyFourCharacterTable(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable(strings.Repeat("t", 64))
	tb.Columns.Attempt = strings.Repeat("a", 64)
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(db, tb, "q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlqueue.Publish(ctx, pub, "x"); err != nil {
		t.Fatal(err)
	}
	ep, err := Lease(db, tb, "q")
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan core.Settlement, 1)
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithObserver(func(s core.Settlement) { settled <- s }))
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[string]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	select {
	case st := <-settled:
		if st.Err != nil || st.Verdict.Action != core.ActAck {
			t.Errorf("settlement %+v", st)
		}
	case err := <-done:
		t.Fatalf("the App stopped: %v", err)
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("no settlement")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
