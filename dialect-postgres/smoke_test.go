package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// plainTable is the standard table without group and processed_at: one queue, ack deletes.
func plainTable(name string) sqlqueue.Table {
	t := sqlqueue.StandardTable(name)
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	return t
}

type form struct {
	name string
	ep   func(db *postgres.DB, t sqlqueue.Table, group string) (core.Endpoint, error)
}

var forms = []form{{"lease", postgres.Lease}, {"rowlock", postgres.RowLock}, {"advisory", postgres.Advisory}}

func TestSmokeEachForm(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			e := setup(t)
			e.standard("jobs")
			for i := range 20 {
				e.exec(`INSERT INTO jobs (payload) VALUES ($1)`, []byte(`{"n":`+string(rune('0'+i%10))+`}`))
			}
			a := newApp(e, nil)
			ep, err := f.ep(e.db, plainTable("jobs"), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[map[string]int]) error {
				if m.Payload["n"]%3 == 0 {
					return core.Drop()
				}
				return nil
			}, core.Workers(4)); err != nil {
				t.Fatal(err)
			}
			a.start(t)
			for range 20 {
				if s := a.next(t); s.Err != nil {
					t.Fatalf("settlement: %v", s.Err)
				}
			}
			a.stop(t)
			if n := e.count(`SELECT count(*) FROM jobs`); n != 0 {
				t.Fatalf("%d rows left", n)
			}
		})
	}
}

func TestPublishThenConsume(t *testing.T) {
	e := setup(t)
	e.standard("jobs")
	pub, err := postgres.NewPublisher(e.db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(e, nil)
	ep, err := postgres.Lease(e.db, plainTable("jobs"), "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan map[string]string, 1)
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[string]) error {
		got <- m.Headers()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	if _, err := sqlqueue.Publish(context.Background(), pub, "hello", sqlqueue.WithHeaders(map[string]string{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	if s := a.next(t); s.Err != nil {
		t.Fatal(s.Err)
	}
	if h := <-got; h["k"] != "v" {
		t.Fatalf("headers = %v", h)
	}
}

// leaseFor is sqlqueue.LeaseFor(d) for the lease form, and nothing for the others, which refuse
// an option they would not read.
func leaseFor(form string, d time.Duration) []core.Option {
	if form != "lease" {
		return nil
	}
	return []core.Option{sqlqueue.LeaseFor(d)}
}
