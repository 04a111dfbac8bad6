package eventplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// A subscription refuses to start when its plugin does not declare one of its events, or is
// down and cannot be started; once the plugin can start again, it starts.
func TestSubscribeRefusesAPluginThatCannotServe(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	table := queueTable("jobs")
	db.exec(t, db.ddl(table))
	link := filepath.Join(t.TempDir(), "plugin")
	if err := os.Symlink(os.Args[0], link); err != nil {
		t.Fatal(err)
	}
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := Load(context.Background(), link, Env(helperEnv+"=ok"), WithClock(vc), RestartBackoff(time.Hour, time.Hour), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	subscribe := func(events ...Event) error {
		a := newTestApp(t, db, testLogger())
		ep, err := db.endpoint("lease", table)
		if err != nil {
			t.Fatal(err)
		}
		return core.Subscribe(a.App, ep, func(context.Context, *core.Message[job]) error { return nil }, p.Events(db.dialect, table, events...))
	}

	err = subscribe(EventAck, EventClaim)
	if !errors.Is(err, ErrUndeclared) || !strings.Contains(err.Error(), `plugin "test-helper", event claim`) {
		t.Fatalf("Subscribe with an undeclared event: %v", err)
	}

	if _, err := p.Render(context.Background(), ackRequest(idCrash)); !errors.Is(err, ErrCrashed) {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	err = subscribe(EventAck)
	var se *StartError
	if !errors.As(err, &se) || se.Path != link || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("Subscribe while the plugin cannot start: %v", err)
	}

	if err := os.Symlink(os.Args[0], link); err != nil {
		t.Fatal(err)
	}
	if err := subscribe(EventAck); err != nil {
		t.Fatalf("Subscribe once the plugin can start: %v", err)
	}
}

func TestEventsRefusesBadArguments(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "ok", WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	db := openSQLite(t)
	bad := queueTable("jobs")
	bad.Columns.Attempt = "attempt; DROP TABLE jobs"
	cases := []struct {
		name  string
		opt   core.Option
		words string
	}{
		{"no event", p.Events(db.dialect, queueTable("jobs")), "no event named"},
		{"no dialect", p.Events(nil, queueTable("jobs"), EventAck), "no dialect"},
		{"invalid table", p.Events(db.dialect, bad, EventAck), "invalid name"},
		{"unknown event", p.Events(db.dialect, queueTable("jobs"), Event(42)), "event(42)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newTestApp(t, db, testLogger())
			ep, err := db.endpoint("lease", queueTable("jobs"))
			if err != nil {
				t.Fatal(err)
			}
			err = core.Subscribe(a.App, ep, func(context.Context, *core.Message[job]) error { return nil }, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.words) {
				t.Fatalf("err = %v, want it to say %q", err, c.words)
			}
		})
	}
}

// The mounted event fills the request from the engine's input and the table it was mounted
// for; an event for another table fails.
func TestBindingFillsTheRequest(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	table := sqlqueue.StandardTable("jobs")
	p, err := loadHelper(t, "ok", WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlqueue.NewSchema(db.dialect, table)
	if err != nil {
		t.Fatal(err)
	}
	b := &binding{p: p, d: db.dialect, o: &core.Options{Name: "refunds-worker"}, ph: PlaceholdersQuestion, ref: s.Table.Ref(),
		table: Table{Table: s.Table, QuotedName: s.QTable, Quoted: sqlqueue.Columns{ID: s.ID, LockedUntil: s.LockedUntil}}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := sqlqueue.EventInput{Kind: sqlqueue.EventAck, Form: sqlqueue.FormLease, Dialect: "sqlite", Queue: "refunds",
		Table: s.Table.Ref(), Group: "refunds", Now: now, ID: 5, Attempt: 3, Token: now.Add(time.Minute)}
	stmts, err := b.event(EventAck)(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(stmts) != 1 || stmts[0].SQL != `DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?` ||
		stmts[0].Args[0] != int64(5) || !stmts[0].Args[1].(time.Time).Equal(in.Token) {
		t.Fatalf("statements %+v", stmts)
	}
	in.Table = sqlqueue.TableRef{Name: "other"}
	if _, err := b.event(EventAck)(context.Background(), in); err == nil || !strings.Contains(err.Error(), "the event is for table other") {
		t.Fatalf("event for another table: %v", err)
	}
}

// inProcess wraps h, connected in process, in a Plugin, so that a binding's requests can be
// read back.
func inProcess(t *testing.T, h Handler) *Plugin {
	m, err := h.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &Plugin{path: "in-process", cfg: defaultConfig(), name: m.Name, manifest: m, rpc: connect(t, h).(*grpcClient),
		log: testLogger(), changed: make(chan struct{}), backoff: time.Second}
}

func TestBindingRetryAfterAndDeadLetter(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	impl := &echoHandler{got: make(chan *Request, 4)}
	p := inProcess(t, impl)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		table   sqlqueue.Table
		in      sqlqueue.EventInput
		event   Event
		dialect string
		check   func(t *testing.T, r *Request)
	}{
		{"dead letter table", queueTable("jobs"), sqlqueue.EventInput{Kind: sqlqueue.EventDeadLetter, Dialect: "postgres", Queue: "jobs", Now: now, ID: 1, Attempt: 5, Dest: "archive.jobs_dead"},
			EventDeadLetter, "postgres", func(t *testing.T, r *Request) {
				if r.Dest != (Destination{Name: "archive.jobs_dead", QuotedTable: `"archive"."jobs_dead"`}) || r.Subscription != "jobs" {
					t.Errorf("request %+v", r)
				}
			}},
		{"dead letter group", sqlqueue.StandardTable("jobs"), sqlqueue.EventInput{Kind: sqlqueue.EventDeadLetter, Dialect: "postgres", Queue: "jobs", Group: "jobs", Now: now, ID: 1, Attempt: 5, Dest: "jobs.dead"},
			EventDeadLetter, "postgres", func(t *testing.T, r *Request) {
				if r.Dest != (Destination{Name: "jobs.dead", IsGroup: true}) || r.Row.Group != "jobs" {
					t.Errorf("request %+v", r)
				}
			}},
		{"claim", sqlqueue.StandardTable("jobs"), sqlqueue.EventInput{Kind: sqlqueue.EventClaim, Dialect: "postgres", Queue: "jobs", Group: "jobs", Now: now, Limit: 10, Token: now.Add(time.Minute)},
			EventClaim, "postgres", func(t *testing.T, r *Request) {
				if r.Claim != (Claim{Limit: 10, Group: "jobs", Token: now.Add(time.Minute)}) || r.Row != (Row{}) {
					t.Errorf("request %+v", r)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sqlqueue.NewSchema(db.dialect, c.table)
			if err != nil {
				t.Fatal(err)
			}
			c.in.Table = s.Table.Ref()
			b := &binding{p: p, d: db.dialect, o: &core.Options{}, ph: PlaceholdersDollar, ref: s.Table.Ref(),
				table: Table{Table: s.Table, QuotedName: s.QTable}}
			if _, err := b.event(c.event)(context.Background(), c.in); err != nil {
				t.Fatal(err)
			}
			c.check(t, <-impl.got)
		})
	}
	t.Run("retry after", func(t *testing.T) {
		all := &echoAll{&echoHandler{got: make(chan *Request, 1)}}
		s, _ := sqlqueue.NewSchema(db.dialect, queueTable("jobs"))
		b := &binding{p: inProcess(t, all), d: db.dialect, o: &core.Options{}, ph: PlaceholdersQuestion, ref: s.Table.Ref(), table: Table{Table: s.Table}}
		in := sqlqueue.EventInput{Kind: sqlqueue.EventRetryAfter, Dialect: "sqlite", Table: s.Table.Ref(), Now: now, RetryAfter: now.Add(90 * time.Second)}
		if _, err := b.event(EventRetryAfter)(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if r := <-all.got; r.Delay != 90*time.Second || !r.RetryAt.Equal(now.Add(90*time.Second)) {
			t.Errorf("delay %v, retry at %v", r.Delay, r.RetryAt)
		}
	})
	t.Run("undeclared", func(t *testing.T) {
		// echoHandler declares claim and dead_letter only: drop is refused before any call.
		s, _ := sqlqueue.NewSchema(db.dialect, queueTable("jobs"))
		b := &binding{p: p, d: db.dialect, o: &core.Options{}, ph: PlaceholdersQuestion, ref: s.Table.Ref(), table: Table{Table: s.Table}}
		in := sqlqueue.EventInput{Kind: sqlqueue.EventDrop, Dialect: "sqlite", Table: s.Table.Ref(), Now: now, ID: 1}
		if _, err := b.event(EventDrop)(context.Background(), in); !errors.Is(err, ErrUndeclared) {
			t.Fatalf("err = %v", err)
		}
	})
}

// echoAll is an echoHandler that declares every event.
type echoAll struct{ *echoHandler }

func (echoAll) Describe(context.Context) (Manifest, error) {
	m := Manifest{Name: "echo-all"}
	for _, e := range Events {
		m.Handles = append(m.Handles, Handles{Event: e})
	}
	return m, nil
}
