package mysql

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// TestClaimIndexHint: the claims of a table made by the DDL read it through its ready index; a
// table whose claims compare no column with a constant, or that has no index starting with the
// columns they compare, is read by its primary key, the latter with a warning naming the index
// to create.
func TestClaimIndexHint(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		if err := db.CreateTable(ctx, sqlqueue.StandardTable("jobs")); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		d := newDialect(Version{Flavour: MariaDB}, slog.New(slog.NewTextHandler(&logs, nil)))
		q := db.Queue()
		hint, err := d.ClaimIndexHint(ctx, q, sqlqueue.TableRef{Name: "jobs"}, []string{"grp", "processed_at"})
		if err != nil || hint != " FORCE INDEX (`jobs_ready`)" {
			t.Errorf("standard table: hint %q, %v; want its ready index", hint, err)
		}
		// Column names compare without case, and in any order.
		if hint, _ = d.ClaimIndexHint(ctx, q, sqlqueue.TableRef{Name: "jobs"}, []string{"PROCESSED_AT", "Grp"}); hint != " FORCE INDEX (`jobs_ready`)" {
			t.Errorf("columns in another order and case: hint %q; want the ready index", hint)
		}
		if hint, _ = d.ClaimIndexHint(ctx, q, sqlqueue.TableRef{Name: "jobs"}, nil); hint != " FORCE INDEX (PRIMARY)" {
			t.Errorf("no leading columns: hint %q; want the primary key", hint)
		}
		if logs.Len() != 0 {
			t.Errorf("warned with an index to use: %s", logs.String())
		}
		if _, err := db.Pool().ExecContext(ctx, "CREATE TABLE bare (id BIGINT AUTO_INCREMENT PRIMARY KEY, grp VARCHAR(20) NOT NULL, payload LONGBLOB, KEY bare_grp_only (payload(10)))"); err != nil {
			t.Fatal(err)
		}
		if hint, _ = d.ClaimIndexHint(ctx, q, sqlqueue.TableRef{Name: "bare"}, []string{"grp"}); hint != " FORCE INDEX (PRIMARY)" {
			t.Errorf("no index on grp: hint %q; want the primary key", hint)
		}
		if !strings.Contains(logs.String(), "table=bare") || !strings.Contains(logs.String(), "KEY bare_ready (grp, <id column>)") {
			t.Errorf("no warning naming the index to create: %s", logs.String())
		}
		if _, err := d.ClaimIndexHint(ctx, q, sqlqueue.TableRef{Schema: "no_such_db", Name: "jobs"}, []string{"grp"}); err != nil {
			t.Errorf("a missing schema lists no index, it is not an error here (the column check names it): %v", err)
		}
	})
}

// TestSettlementNotHeldByClaimPassingOver: a row-lock subscription that counts its attempts
// (DeadLetterAfter) locks the rows it counted again by id, and holds row 1 while its handler
// runs; a second subscription's claim then passes over row 1 on its way to row 2 and keeps its
// claim open (its handler waits). The first handler's ack must settle at once: before the
// claims read the table through one index, InnoDB kept the second claim's lock on row 1's
// ready-index entry and the first settlement waited for it until the lock timeout (two
// processes stalled 30 s this way in the fault suite).
func TestSettlementNotHeldByClaimPassingOver(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		ctx := context.Background()
		db := openDB(t, s)
		tb := sqlqueue.StandardTable("jobs")
		if err := db.CreateTable(ctx, tb); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool().ExecContext(ctx, "INSERT INTO jobs (payload, grp) VALUES ('\"one\"', 'work'), ('\"two\"', 'work')"); err != nil {
			t.Fatal(err)
		}
		run := func(h core.Handler[string], obs core.Observer, opts ...core.Option) {
			app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)), core.WithObserver(obs))
			ep, err := RowLock(db, tb, "work")
			if err != nil {
				t.Fatal(err)
			}
			if err := core.Subscribe(app, ep, h, append(opts, sqlqueue.BatchSize(1), core.Workers(1), sqlqueue.LockTimeout(3*time.Second))...); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- app.Run(runCtx) }()
			t.Cleanup(func() { stop(); <-done })
		}
		firstIn, release := make(chan string, 1), make(chan struct{})
		settled := make(chan core.Settlement, 4)
		run(func(ctx context.Context, m *core.Message[string]) error {
			firstIn <- m.Payload
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}, func(s core.Settlement) { settled <- s }, core.DeadLetterAfter(5, "dead"))
		if got := <-firstIn; got != "one" {
			t.Fatalf("the counting subscription got %q first; want one", got)
		}
		secondIn, hold := make(chan string, 1), make(chan struct{})
		run(func(ctx context.Context, m *core.Message[string]) error {
			secondIn <- m.Payload
			<-hold // holds its claim open until the test ends
			return nil
		}, func(core.Settlement) {})
		t.Cleanup(func() { close(hold) }) // before the subscriptions stop
		select {
		case got := <-secondIn:
			if got != "two" {
				t.Fatalf("the second subscription got %q; want two", got)
			}
		case <-time.After(coretest.WaitTimeout):
			t.Fatal("the second subscription claimed nothing")
		}
		start := time.Now()
		close(release)
		select {
		case st := <-settled:
			if st.Err != nil {
				t.Fatalf("the first ack failed after %v: %v", time.Since(start), st.Err)
			}
		case <-time.After(coretest.WaitTimeout):
			t.Fatalf("the first ack did not settle in %v", coretest.WaitTimeout)
		}
	})
}
