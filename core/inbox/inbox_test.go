package inbox

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

type payment struct {
	ID string `json:"id"`
}

type setup struct {
	h   *coretest.Harness
	db  *memDB
	box *Inbox
	pub *core.Publisher[payment]
}

// newSetup mounts handle behind an inbox on the in-memory broker's queue "payments".
func newSetup(t *testing.T, handle core.Handler[payment], opts ...core.Option) *setup {
	t.Helper()
	h := coretest.New(t)
	db := newMemDB()
	box, err := New(family{sqlqueue.FamilySQLite}, db, "inbox", WithClock(h.Clock), WithLogger(slog.New(h.Logs)))
	if err != nil {
		t.Fatal(err)
	}
	h.App.Register(box)
	coretest.Subscribe(h, "payments", handle, append([]core.Option{box.Receive()}, opts...)...)
	h.Start()
	pub, err := core.NewPublisher[payment](h.Broker.Queue("payments"))
	if err != nil {
		t.Fatal(err)
	}
	return &setup{h: h, db: db, box: box, pub: pub}
}

func (s *setup) publish(t *testing.T, id string) {
	t.Helper()
	if _, err := s.pub.Publish(context.Background(), payment{ID: id}, core.MessageID(id)); err != nil {
		t.Fatal(err)
	}
}

// book writes the payment's ledger row through the inbox's transaction.
func book(ctx context.Context, m *core.Message[payment]) error {
	tx, err := Tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO ledger (payment) VALUES ($1)", m.Payload.ID)
	return err
}

// TestRedeliveryIsAcknowledgedWithoutTheHandler: a second delivery of a message whose effects
// committed is acknowledged and the handler does not run; the ledger holds one row.
func TestRedeliveryIsAcknowledgedWithoutTheHandler(t *testing.T) {
	calls := 0
	s := newSetup(t, func(ctx context.Context, m *core.Message[payment]) error {
		calls++
		return book(ctx, m)
	})
	s.publish(t, "p-1")
	s.h.WaitSettled(1)
	s.publish(t, "p-1") // the same message again: a redelivery after a crash before the ack
	s.publish(t, "p-2")
	all := s.h.WaitSettled(3)
	for _, st := range all {
		if st.Verdict.Action != core.ActAck {
			t.Errorf("%s: %s, want ack", st.Delivery.ID(), st.Verdict.Action)
		}
	}
	ids, ledger, open := s.db.snapshot()
	if calls != 2 || len(ledger) != 2 || !ids["p-1"] || !ids["p-2"] || open != 0 {
		t.Errorf("handler calls %d, ledger %v, ids %v, open transactions %d; want 2 calls, p-1 and p-2 once, none open", calls, ledger, ids, open)
	}
	if st := s.box.Stats(); st.Recorded != 2 || st.Duplicates != 1 {
		t.Errorf("stats %+v, want 2 recorded and 1 duplicate", st)
	}
	if len(s.h.Logs.Find("inbox: message already processed; acknowledged without the handler")) != 1 {
		t.Error("the duplicate was not logged")
	}
}

// TestFailuresRollBackTheRecord: a handler error, a panic and a failed commit keep neither the
// handler's writes nor the id, so the retry runs the handler again.
func TestFailuresRollBackTheRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(s *setup) error
	}{
		{"error", func(*setup) error { return errors.New("card declined") }},
		{"panic", func(*setup) error { panic("handler bug") }},
		{"commit", func(s *setup) error { s.db.failCommit = true; return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *setup
			calls := 0
			s = newSetup(t, func(ctx context.Context, m *core.Message[payment]) error {
				calls++
				if err := book(ctx, m); err != nil {
					return err
				}
				if calls == 1 {
					return c.fail(s)
				}
				s.db.mu.Lock()
				s.db.failCommit = false
				s.db.mu.Unlock()
				return nil
			})
			s.publish(t, "p-1")
			s.h.WaitFor(func(all []core.Settlement) bool {
				return len(all) > 0 && all[len(all)-1].Verdict.Action == core.ActAck
			})
			ids, ledger, open := s.db.snapshot()
			if calls != 2 || len(ledger) != 1 || !ids["p-1"] || open != 0 {
				t.Errorf("calls %d, ledger %v, ids %v, open %d; want the retry to book p-1 once", calls, ledger, ids, open)
			}
		})
	}
}

// TestTxBelongsToTheInbox: outside an inbox handler Tx says so; inside, the handler cannot end
// the transaction itself.
func TestTxBelongsToTheInbox(t *testing.T) {
	if _, err := Tx(context.Background()); !errors.Is(err, ErrNoTransaction) {
		t.Errorf("Tx outside: %v", err)
	}
	var commitErr, asErr error
	s := newSetup(t, func(ctx context.Context, m *core.Message[payment]) error {
		tx, _ := Tx(ctx)
		commitErr = tx.Commit(ctx)
		_, asErr = TxAs[*memTx](ctx)
		return book(ctx, m)
	})
	s.publish(t, "p-1")
	s.h.WaitSettled(1)
	if commitErr == nil || asErr != nil {
		t.Errorf("Commit by the handler: %v; TxAs: %v", commitErr, asErr)
	}
	if _, ledger, _ := s.db.snapshot(); len(ledger) != 1 {
		t.Errorf("ledger %v", ledger)
	}
}

// TestKeyFrom: a key of the sender's own replaces the delivery id; a long key is stored hashed,
// a delivery without a key is handled without deduplication.
func TestKeyFrom(t *testing.T) {
	db := newMemDB()
	box, err := New(family{sqlqueue.FamilyPostgres}, db, "inbox", KeyFrom(func(d core.Delivery) string { return d.Headers()["order"] }))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := box.Middleware(func(context.Context, core.Delivery) error { calls++; return nil })
	long := strings.Repeat("x", 300)
	for _, d := range []fakeDelivery{{id: "a", order: "o-1"}, {id: "b", order: "o-1"}, {id: "c"}, {id: "d"}, {id: "e", order: long}, {id: "f", order: long}} {
		if err := h(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	ids, _, _ := db.snapshot()
	if calls != 4 || len(ids) != 2 || !ids["o-1"] || !ids[storedKey(long)] || !strings.HasPrefix(storedKey(long), "sha256:") {
		t.Errorf("calls %d, ids %v", calls, ids)
	}
}

type fakeDelivery struct{ id, order string }

func (d fakeDelivery) ID() string   { return d.id }
func (d fakeDelivery) Attempt() int { return 1 }
func (d fakeDelivery) Body() []byte { return nil }
func (d fakeDelivery) Headers() map[string]string {
	if d.order == "" {
		return nil
	}
	return map[string]string{"order": d.order}
}

// TestDDLAndSpelling: the table from the dialect's declared types, the insert that does nothing
// on a duplicate per family, and clear refusals.
func TestDDLAndSpelling(t *testing.T) {
	ddl, err := DDL(family{sqlqueue.FamilyPostgres}, "app.inbox")
	if err != nil {
		t.Fatal(err)
	}
	if want := "CREATE TABLE IF NOT EXISTS \"app\".\"inbox\" (\n  \"id\" TXT NOT NULL PRIMARY KEY,\n  \"received_at\" TS NOT NULL\n) OPTS"; ddl != want {
		t.Errorf("DDL:\n%s\nwant\n%s", ddl, want)
	}
	if _, err := DDL(family{}, "a_long_inbox_name"); err == nil || !strings.Contains(err.Error(), "at most 12") {
		t.Errorf("a name past the limit: %v", err)
	}
	for f, want := range map[sqlqueue.Family]string{
		sqlqueue.FamilyPostgres: `INSERT INTO "inbox" ("id", "received_at") VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		sqlqueue.FamilySQLite:   `INSERT INTO "inbox" ("id", "received_at") VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		sqlqueue.FamilyMySQL:    `INSERT IGNORE INTO "inbox" ("id", "received_at") VALUES ($1, $2)`,
		sqlqueue.FamilyMariaDB:  `INSERT IGNORE INTO "inbox" ("id", "received_at") VALUES ($1, $2)`,
	} {
		b, err := New(family{f}, newMemDB(), "inbox")
		if err != nil {
			t.Fatal(err)
		}
		if b.insert != want {
			t.Errorf("%s: %s", f, b.insert)
		}
	}
	if _, err := New(family{"duckdb"}, newMemDB(), "inbox"); err == nil || !strings.Contains(err.Error(), "duckdb") {
		t.Errorf("an unknown family: %v", err)
	}
	if _, err := New(family{sqlqueue.FamilySQLite}, newMemDB(), "inbox", Retain(0, 1)); err == nil || !strings.Contains(err.Error(), "Retain") {
		t.Errorf("Retain(0, 1): %v", err)
	}
}
