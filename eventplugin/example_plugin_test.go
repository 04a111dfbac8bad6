package eventplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// waitTimeout bounds every wait in real time; running out fails the test.
const waitTimeout = 30 * time.Second

// backend is one database the real-subprocess tests run against: a fresh, isolated database
// per call, its dialect, the claim forms it offers, and its own client to read rows back.
type backend struct {
	name string
	// forms names the claim forms the dialect offers.
	forms []string
	// open returns a fresh database for t (skipping t when the server is unreachable).
	open func(t testing.TB) *database
}

type database struct {
	dialect  sqlqueue.Dialect
	register func(a *core.App)
	// endpoint constructs the endpoint of form on table t.
	endpoint func(form string, t sqlqueue.Table) (core.Endpoint, error)
	// ddl creates a queue table described by t.
	ddl func(t sqlqueue.Table) string
	// exec and count run statements with the database's own client.
	exec  func(t testing.TB, sql string, args ...any)
	count func(t testing.TB, sql string, args ...any) int
	// retryAfter reads a row's retry_after as a time.
	retryAfter func(t testing.TB, table string, id int64) time.Time
}

// backends are registered by the dialect files of this test (postgres_test.go, …).
var backends []backend

// queueTable is the standard table without group and processed_at: one queue, ack deletes.
func queueTable(name string) sqlqueue.Table {
	t := sqlqueue.StandardTable(name)
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	return t
}

// testApp is a running App whose settlements arrive on a channel.
type testApp struct {
	*core.App
	settled chan core.Settlement
	cancel  context.CancelFunc
	done    chan error
}

func newTestApp(t testing.TB, db *database, logger *slog.Logger) *testApp {
	a := &testApp{settled: make(chan core.Settlement, 1000)}
	a.App = core.New(core.WithoutSignals(), core.WithShutdownTimeout(10*time.Second), core.WithLogger(logger),
		core.WithObserver(func(s core.Settlement) { a.settled <- s }))
	db.register(a.App)
	return a
}

func (a *testApp) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan error, 1)
	go func() { a.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-a.done:
			if err != nil {
				t.Errorf("App.Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("App.Run did not return within %v", waitTimeout)
		}
	})
}

func (a *testApp) next(t testing.TB) core.Settlement {
	t.Helper()
	select {
	case s := <-a.settled:
		return s
	case <-time.After(waitTimeout):
		t.Fatalf("no settlement within %v", waitTimeout)
	}
	return core.Settlement{}
}

func testLogger() *slog.Logger {
	if coretest.Env("SETTLE_TEST_LOG", "") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// auditPlugin loads the example plugin, built once per test binary, with a 1-minute cap on
// retry_after delays.
func auditPlugin(t *testing.T) *Plugin {
	t.Helper()
	bin := buildPlugin(t, "examples/audit")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p, err := Load(ctx, bin, Args("-max-delay", "1m"), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type job struct{ N int }

// TestExamplePluginSubprocess runs the example plugin as a real subprocess under a
// subscription, in every form of every reachable database: its ack records an audit row and
// deletes the job, its retry_after caps a one-hour delay at one minute.
func TestExamplePluginSubprocess(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := auditPlugin(t)
			for _, form := range b.forms {
				t.Run(form, func(t *testing.T) {
					runAudit(t, b.open(t), p, form)
				})
			}
		})
	}
}

func runAudit(t *testing.T, db *database, p *Plugin, form string) {
	table := queueTable("jobs")
	db.exec(t, db.ddl(table))
	db.exec(t, auditDDL(t, db.dialect.Name()))
	for n := 1; n <= 2; n++ {
		payload, _ := json.Marshal(job{N: n})
		db.exec(t, "INSERT INTO jobs (payload) VALUES ("+db.dialect.Placeholder(1)+")", payload)
	}
	a := newTestApp(t, db, testLogger())
	ep, err := db.endpoint(form, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[job]) error {
		if m.Payload.N == 2 {
			return core.RetryAfter(time.Hour)
		}
		return nil
	}, p.Events(db.dialect, table, EventAck, EventRetryAfter)); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	a.start(t)
	for range 2 {
		if s := a.next(t); s.Err != nil {
			t.Fatalf("settlement of %s (%v): %v", s.Delivery.ID(), s.Verdict, s.Err)
		}
	}
	after := time.Now()
	if n := db.count(t, "SELECT count(*) FROM jobs WHERE id = 1"); n != 0 {
		t.Errorf("the acked job is still there")
	}
	if n := db.count(t, "SELECT count(*) FROM settle_audit WHERE queue = 'jobs' AND msg_id = 1 AND attempt = 1 AND outcome = 'ack'"); n != 1 {
		t.Errorf("%d audit rows for the acked job, want 1", n)
	}
	ra := db.retryAfter(t, "jobs", 2)
	if ra.Before(before.Add(time.Minute).Add(-time.Second)) || ra.After(after.Add(time.Minute).Add(time.Second)) {
		t.Errorf("retry_after of the delayed job is %v, want the 1-minute cap past %v", ra, before)
	}
}

// auditDDL asks the example plugin binary for its audit table's DDL.
func auditDDL(t testing.TB, dialect string) string {
	t.Helper()
	out, err := exec.Command(buildPlugin(t, "examples/audit"), "-print-ddl", dialect).Output()
	if err != nil {
		t.Fatalf("audit -print-ddl %s: %v", dialect, err)
	}
	return string(out)
}

// TestBadStatementsNeverLoseARow mounts plugin events that fail in each way a plugin can fail
// an event (its SQL does not parse, its arguments do not match its placeholders, its handler
// errs) in every form of every reachable database: each failed ack is a failed settlement
// naming the event, and the row comes back as the form returns it, to be dropped by the
// dialect's own statement on the next delivery.
func TestBadStatementsNeverLoseARow(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p, err := loadHelper(t, "ok", WithLogger(testLogger()))
			if err != nil {
				t.Fatal(err)
			}
			for _, form := range b.forms {
				t.Run(form, func(t *testing.T) {
					runBadStatements(t, b.open(t), p, form)
				})
			}
		})
	}
}

func runBadStatements(t *testing.T, db *database, p *Plugin, form string) {
	table := queueTable("jobs")
	db.exec(t, db.ddl(table))
	want := map[string]string{
		"13": `plugin "test-helper", event ack: row 13 is cursed`,
		"21": `plugin "test-helper", event ack: statement 1 has 1 placeholders but 2 arguments`,
		"31": `custom ack event: eventplugin: plugin "test-helper", event ack: `, // the server refused the plugin's SQL
	}
	for id := range want {
		db.exec(t, "INSERT INTO jobs (id, payload) VALUES ("+id+", "+db.dialect.Placeholder(1)+")", []byte(`{"N":0}`))
	}
	a := newTestApp(t, db, testLogger())
	ep, err := db.endpoint(form, table)
	if err != nil {
		t.Fatal(err)
	}
	// The first delivery of a row acks (through the failing plugin event); the next one drops
	// it with the dialect's own statement. A failed settlement charges an attempt in some forms
	// only (the row-lock form rolls the claim back), so the handler counts deliveries itself.
	var seen sync.Map
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[job]) error {
		if _, again := seen.LoadOrStore(m.Delivery().ID(), true); again {
			return core.Drop()
		}
		return nil
	}, append(leaseFor(form, time.Second), p.Events(db.dialect, table, EventAck), sqlqueue.BatchSize(1),
		sqlqueue.PollInterval(50*time.Millisecond))...); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	failed, dropped := map[string]bool{}, map[string]bool{}
	for len(failed) < len(want) || len(dropped) < len(want) {
		s := a.next(t)
		id := s.Delivery.ID()
		switch {
		case s.Verdict.Action == core.ActAck:
			if s.Err == nil {
				t.Fatalf("row %s: the ack through the failing plugin event succeeded", id)
			}
			if !strings.Contains(s.Err.Error(), want[id]) {
				t.Errorf("row %s: error %q does not say %q", id, s.Err, want[id])
			}
			if pe := (*Error)(nil); !errors.As(s.Err, &pe) || pe.Plugin != "test-helper" {
				t.Errorf("row %s: no *eventplugin.Error naming the plugin in %q", id, s.Err)
			}
			failed[id] = true
		case s.Verdict.Action == core.ActDrop && s.Err == nil:
			if !failed[id] {
				t.Fatalf("row %s dropped before its failed ack", id)
			}
			dropped[id] = true
		default:
			t.Fatalf("row %s: unexpected settlement %v: %v", id, s.Verdict, s.Err)
		}
	}
	if n := db.count(t, "SELECT count(*) FROM jobs"); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

// TestCrashedPluginReturnsTheRow crashes the plugin subprocess, or hangs it past the call
// timeout, during an ack under a running subscription, in every form of every reachable
// database: the ack fails naming plugin and event, the row comes back as the form returns it,
// and the plugin, restarted after its backoff, acks the next row.
func TestCrashedPluginReturnsTheRow(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, form := range b.forms {
				for _, c := range []struct {
					name string
					id   int64
					want error
				}{{"crash", idCrash, ErrCrashed}, {"hang", idHang, ErrTimeout}} {
					t.Run(form+"/"+c.name, func(t *testing.T) {
						t.Parallel()
						p, err := loadHelper(t, "ok", WithLogger(testLogger()), CallTimeout(time.Second),
							RestartBackoff(10*time.Millisecond, 10*time.Millisecond))
						if err != nil {
							t.Fatal(err)
						}
						runCrash(t, b.open(t), p, form, c.id, c.want)
					})
				}
			}
		})
	}
}

func runCrash(t *testing.T, db *database, p *Plugin, form string, badID int64, want error) {
	table := queueTable("jobs")
	db.exec(t, db.ddl(table))
	db.exec(t, "INSERT INTO jobs (id, payload) VALUES ("+fmt.Sprint(badID)+", "+db.dialect.Placeholder(1)+")", []byte(`{"N":0}`))
	a := newTestApp(t, db, testLogger())
	ep, err := db.endpoint(form, table)
	if err != nil {
		t.Fatal(err)
	}
	var seen sync.Map
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[job]) error {
		if _, again := seen.LoadOrStore(m.Delivery().ID(), true); again && m.Delivery().ID() == fmt.Sprint(badID) {
			return core.Drop()
		}
		return nil
	}, append(leaseFor(form, time.Second), p.Events(db.dialect, table, EventAck), sqlqueue.BatchSize(1),
		sqlqueue.PollInterval(50*time.Millisecond))...); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	s := a.next(t)
	if s.Verdict.Action != core.ActAck || !errors.Is(s.Err, want) || !strings.Contains(s.Err.Error(), `plugin "test-helper", event ack`) {
		t.Fatalf("first settlement: %v: %v, want the ack to fail with %v naming plugin and event", s.Verdict, s.Err, want)
	}
	if s = a.next(t); s.Verdict.Action != core.ActDrop || s.Err != nil {
		t.Fatalf("second settlement: %v: %v, want the returned row dropped", s.Verdict, s.Err)
	}
	db.exec(t, "INSERT INTO jobs (id, payload) VALUES (1, "+db.dialect.Placeholder(1)+")", []byte(`{"N":1}`))
	// Until the restart the ack fails with ErrUnavailable and the row comes back again (a
	// machine loaded past the call timeout fails it with ErrTimeout, and it comes back too).
	for {
		s = a.next(t)
		if s.Err == nil {
			break
		}
		if !errors.Is(s.Err, ErrUnavailable) && !errors.Is(s.Err, ErrTimeout) {
			t.Fatalf("ack of the next row: %v", s.Err)
		}
	}
	if s.Verdict.Action != core.ActAck || s.Delivery.ID() != "1" {
		t.Fatalf("settlement %v of row %s, want the ack of row 1", s.Verdict, s.Delivery.ID())
	}
	if n := db.count(t, "SELECT count(*) FROM jobs"); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

// TestPluginRenderedClaim claims through a plugin in every form that takes a custom claim
// (not advisory) of every reachable database: the plugin's rule leaves rows with three
// attempts alone, and the rows it claims are delivered with their attempt.
func TestPluginRenderedClaim(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p, err := loadHelper(t, "claim", WithLogger(testLogger()))
			if err != nil {
				t.Fatal(err)
			}
			for _, form := range b.forms {
				if form == "advisory" {
					continue
				}
				t.Run(form, func(t *testing.T) { runClaim(t, b.open(t), p, form) })
			}
		})
	}
}

func runClaim(t *testing.T, db *database, p *Plugin, form string) {
	table := queueTable("jobs")
	db.exec(t, db.ddl(table))
	for id, attempt := range map[int]int{1: 0, 2: 3, 3: 1} {
		db.exec(t, fmt.Sprintf("INSERT INTO jobs (id, payload, attempt) VALUES (%d, %s, %d)", id, db.dialect.Placeholder(1), attempt), []byte(`{"N":1}`))
	}
	a := newTestApp(t, db, testLogger())
	ep, err := db.endpoint(form, table)
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan [2]int, 10)
	if err := core.Subscribe(a.App, ep, func(ctx context.Context, m *core.Message[job]) error {
		var id int
		fmt.Sscan(m.Delivery().ID(), &id)
		attempts <- [2]int{id, m.Attempt()}
		return nil
	}, p.Events(db.dialect, table, EventClaim)); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	for range 2 {
		if s := a.next(t); s.Err != nil || s.Verdict.Action != core.ActAck {
			t.Fatalf("settlement %v: %v", s.Verdict, s.Err)
		}
	}
	got := map[int]int{}
	for range 2 {
		d := <-attempts
		got[d[0]] = d[1]
	}
	if want := map[int]int{1: 1, 3: 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("delivered rows and attempts %v, want %v", got, want)
	}
	if n := db.count(t, "SELECT count(*) FROM jobs WHERE id = 2 AND attempt = 3 AND locked_until IS NULL"); n != 1 {
		t.Errorf("the row with three attempts was claimed")
	}
	if n := db.count(t, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("%d rows left, want only the held-back one", n)
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
