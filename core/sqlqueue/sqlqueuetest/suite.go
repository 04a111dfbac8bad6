// Package sqlqueuetest is the conformance suite every SQL dialect runs from its own tests:
// for each outcome in each claim form the dialect offers, over several table shapes, with
// transactional mode off and on, it reads the queue table back with the dialect's own client
// and asserts what the rows hold; then lease loss, lease extension, abandoned deliveries,
// delays across restarts, concurrent claimants, advisory key serialisation, custom events and
// bad input. Time is a virtual clock: the engine computes every timestamp it writes.
//
//	func TestConformance(t *testing.T) {
//		sqlqueuetest.Run(t, func(t *testing.T) *sqlqueuetest.Fixture { … a fresh database … })
//	}
package sqlqueuetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Row is one queue-table row as the dialect's own client reads it. Times are nil for NULL.
type Row struct {
	ID          int64
	Payload     []byte
	Group       string
	Attempt     int
	RetryAfter  *time.Time
	LockedUntil *time.Time
	ProcessedAt *time.Time
	Headers     []byte
	// LastError is the last_error column; "" for NULL.
	LastError string
}

// Endpoint constructs a queue endpoint of one form.
type Endpoint func(t sqlqueue.Table, group string) (core.Endpoint, error)

// Fixture is one fresh, isolated database (a file, a schema) for one test, with the dialect's
// own client. Leave an endpoint constructor nil for a form the dialect lacks: its cases are
// skipped.
type Fixture struct {
	// DB and Dialect are what the engine runs on.
	DB      sqlqueue.DB
	Dialect sqlqueue.Dialect
	// CreateTable creates a queue table with the dialect's DDL helper.
	CreateTable func(ctx context.Context, t sqlqueue.Table) error
	// Exec runs a statement with the dialect's own client (the suite's side table).
	Exec func(ctx context.Context, sql string, args ...any) error
	// Count returns SELECT COUNT(*) of a table, read with the dialect's own client.
	Count func(ctx context.Context, table string) (int, error)
	// Rows reads every row of t, ordered by id, with the dialect's own client; a column t
	// does not name reads as its zero value. Rows and Count honour a table's Schema. SQLTables
	// provides Exec, Count and Rows for a driver with a database/sql face.
	Rows func(ctx context.Context, t sqlqueue.Table) ([]Row, error)
	// Lease, RowLock and Advisory construct endpoints; nil when the dialect lacks the form.
	//
	// A dialect of a database without row locks whose write transaction holds the whole
	// database (SQLite) may still run the row-lock cases, which exercise the engine's
	// transaction-per-claim path, through a test-only shim: RowLock builds sqlqueue.NewRowLock
	// over a wrapper of its dialect whose RowLockClaim is driver.SelectClaim(s, "") and
	// whose RowLocking methods return "" (the open transaction already holds what it read).
	// The dialect then declares driver.SingleWriter, and the suite runs the cases that
	// would keep several claim transactions open at once with one worker. dialect-sqlite's
	// and dialect-sqlite-purego's conformance_test.go hold such a shim; docs/custom-dialect.md
	// explains it.
	Lease, RowLock, Advisory Endpoint
	// Schema is the schema (database) that unqualified table names resolve to on DB, as the
	// catalogue spells it ("main" on SQLite, the search_path's first schema on PostgreSQL, the
	// connection's database on MySQL). With it the suite checks that two spellings of one table
	// share advisory keys; empty skips that case.
	Schema string
	// TimeEqual compares a stored time with the time the engine wrote (default: equal to the
	// microsecond).
	TimeEqual func(stored, want time.Time) bool
	// LeakCheck, when set, checks that the suite leaves no goroutines running: Run checks
	// around each group of cases (they run in parallel, so the check waits until the whole
	// group and its fixtures' cleanups are done), RunTransport after every App it stops.
	LeakCheck coretest.LeakCheck
}

// Open returns a fresh Fixture for one test; it registers its own cleanup.
type Open func(t *testing.T) *Fixture

// Epoch is the virtual clock's start.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the whole suite.
func Run(t *testing.T, open Open) {
	leaks := open(t).LeakCheck // a fixture of its own, open (and ignored) across the groups
	for _, g := range []struct {
		name string
		run  func(*testing.T, Open)
	}{{"Outcomes", RunOutcomes}, {"Lease", RunLease}, {"Behaviour", RunBehaviour}, {"BadInput", RunBadInput}, {"Identity", RunIdentity}, {"Crash", RunCrash}} {
		check := leaks.Check(t)
		if t.Run(g.name, func(t *testing.T) { g.run(t, open) }) {
			check() // a failed group may leave goroutines behind; its failure says enough
		}
	}
}

type form struct {
	name string
	f    sqlqueue.Form
	ep   Endpoint
}

func forms(f *Fixture) []form {
	var out []form
	if f.Lease != nil {
		out = append(out, form{"lease", sqlqueue.FormLease, f.Lease})
	}
	if f.RowLock != nil {
		out = append(out, form{"rowlock", sqlqueue.FormRowLock, f.RowLock})
	}
	if f.Advisory != nil {
		out = append(out, form{"advisory", sqlqueue.FormAdvisory, f.Advisory})
	}
	return out
}

// env is one test's clock, logs and settlements.
type env struct {
	t     *testing.T
	f     *Fixture
	clock *clock.Virtual
	logs  *coretest.Logs
	tap   *logTap
	rec   *coretest.Recorder
	ctx   context.Context
}

func newEnv(t *testing.T, f *Fixture) *env {
	ctx, cancel := context.WithTimeout(context.Background(), 2*coretest.WaitTimeout)
	t.Cleanup(cancel)
	return &env{t: t, f: f, clock: clock.NewVirtual(Epoch), logs: &coretest.Logs{}, tap: &logTap{}, rec: coretest.NewRecorder(t), ctx: ctx}
}

// logTap passes every log record on to the env's logs and to whoever watches its message, so
// that a test can wait on a log line (an engine event it has no other signal of) instead of
// sleeping.
type logTap struct {
	mu      sync.Mutex
	watches map[string][]chan slog.Record
}

// watch returns a channel that receives every record logged with message msg from now on.
func (t *logTap) watch(msg string) <-chan slog.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watches == nil {
		t.watches = map[string][]chan slog.Record{}
	}
	ch := make(chan slog.Record, 64)
	t.watches[msg] = append(t.watches[msg], ch)
	return ch
}

func (t *logTap) seen(r slog.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ch := range t.watches[r.Message] {
		select {
		case ch <- r.Clone():
		default:
		}
	}
}

type tapHandler struct {
	inner slog.Handler
	tap   *logTap
}

func (h tapHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }
func (h tapHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.inner.Handle(ctx, r)
	h.tap.seen(r)
	return err
}
func (h tapHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return tapHandler{inner: h.inner.WithAttrs(a), tap: h.tap}
}
func (h tapHandler) WithGroup(g string) slog.Handler {
	return tapHandler{inner: h.inner.WithGroup(g), tap: h.tap}
}

// attr returns the value of a record's attribute key.
func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// app returns an App on the env's clock (or c), logging to the env's logs.
func (e *env) app(c clock.Clock, opts ...core.AppOption) *core.App {
	if c == nil {
		c = e.clock
	}
	all := append([]core.AppOption{core.WithClock(c), core.WithLogger(slog.New(tapHandler{inner: e.logs, tap: e.tap})), core.WithoutSignals(),
		core.WithObserver(e.rec.Observe), core.WithShutdownTimeout(time.Minute)}, opts...)
	return core.New(all...)
}

// run starts a in the background and returns a function that stops it and waits for Run.
func (e *env) run(a *core.App) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { e.stop(cancel, done) }) }
	e.t.Cleanup(stop)
	return stop
}

func (e *env) stop(cancel context.CancelFunc, done chan error) {
	{
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("App.Run: %v", err)
			}
		case <-time.After(coretest.WaitTimeout):
			e.t.Errorf("App.Run did not return within %v of stopping", coretest.WaitTimeout)
		}
	}
}

// runErr runs a and returns Run's error, for start-up failures.
func (e *env) runErr(a *core.App) error {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

func (e *env) create(tables ...sqlqueue.Table) {
	e.t.Helper()
	for _, tb := range tables {
		if err := e.f.CreateTable(e.ctx, tb); err != nil {
			e.t.Fatalf("creating table %s: %v", tb.Name, err)
		}
	}
}

// deletingQueue creates the standard table q without processed_at (acks and drops delete the
// row) and returns it with a publisher to its group q.
func (e *env) deletingQueue() (sqlqueue.Table, *sqlqueue.Publisher) {
	e.t.Helper()
	tb := sqlqueue.StandardTable("q")
	tb.Columns.ProcessedAt = ""
	e.create(tb)
	return tb, e.publisher(tb, "q")
}

func (e *env) publisher(tb sqlqueue.Table, group string) *sqlqueue.Publisher {
	e.t.Helper()
	p, err := sqlqueue.NewPublisher(e.f.Dialect, e.f.DB, tb, group, sqlqueue.PublishClock(e.clock))
	if err != nil {
		e.t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

func (e *env) publish(p *sqlqueue.Publisher, v any, opts ...sqlqueue.PublishOption) int64 {
	e.t.Helper()
	id, err := sqlqueue.Publish(e.ctx, p, v, opts...)
	if err != nil {
		e.t.Fatalf("Publish: %v", err)
	}
	return id
}

func (e *env) rows(tb sqlqueue.Table) []Row {
	e.t.Helper()
	rs, err := e.f.Rows(e.ctx, tb)
	if err != nil {
		e.t.Fatalf("reading %s: %v", tb.Name, err)
	}
	return rs
}

func (e *env) count(table string) int {
	e.t.Helper()
	n, err := e.f.Count(e.ctx, table)
	if err != nil {
		e.t.Fatalf("counting %s: %v", table, err)
	}
	return n
}

func (e *env) endpoint(fm form, tb sqlqueue.Table, group string) core.Endpoint {
	e.t.Helper()
	ep, err := fm.ep(tb, group)
	if err != nil {
		e.t.Fatalf("%s endpoint on %s: %v", fm.name, tb.Name, err)
	}
	return ep
}

func (e *env) timeIs(what string, got *time.Time, want time.Time) {
	e.t.Helper()
	eq := e.f.TimeEqual
	if eq == nil {
		eq = func(a, b time.Time) bool { return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond)) }
	}
	if got == nil {
		e.t.Errorf("%s is NULL; want %v", what, want)
		return
	}
	if !eq(*got, want) {
		e.t.Errorf("%s = %v; want %v", what, got.UTC(), want)
	}
}

func (e *env) isNull(what string, got *time.Time) {
	e.t.Helper()
	if got != nil {
		e.t.Errorf("%s = %v; want NULL", what, got.UTC())
	}
}

// subscribe mounts h, failing the test on a construction error.
func subscribe[T any](e *env, a *core.App, ep core.Endpoint, h core.Handler[T], opts ...core.Option) {
	e.t.Helper()
	if err := core.Subscribe(a, ep, h, opts...); err != nil {
		e.t.Fatalf("Subscribe: %v", err)
	}
}

// waitFor waits on ch, failing the test after coretest.WaitTimeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("waited %v for %s", coretest.WaitTimeout, what)
	}
	var zero T
	return zero
}

// Refund is the suite's payload.
type Refund struct {
	Card   string `json:"card"`
	Amount int    `json:"amount"`
}

// sideTable is where transactional handlers write.
const sideTable = "settle_side"

func (e *env) createSide() {
	e.t.Helper()
	if err := e.f.Exec(e.ctx, "CREATE TABLE "+e.f.Dialect.Quote(sideTable)+" (note TEXT)"); err != nil {
		e.t.Fatalf("creating the side table: %v", err)
	}
}

// writeSide writes one side row through the delivery's transaction.
func writeSide(ctx context.Context, d sqlqueue.Dialect, note string) error {
	tx, err := sqlqueue.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+d.Quote(sideTable)+" (note) VALUES ("+d.Placeholder(1)+")", note)
	return err
}

// stopWhileHandling stops an App whose one worker is in its handler, and lets the handler
// return only once the App has stopped taking rows, so that a retried row is not taken again
// before the test reads it.
func (e *env) stopWhileHandling(stop func(), release chan struct{}) {
	e.t.Helper()
	armed := e.clock.Pending()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// Run arms its shutdown timer right after it stops pulling.
	if err := e.clock.BlockUntil(e.ctx, armed+1); err != nil {
		e.t.Fatal(err)
	}
	close(release)
	waitFor(e.t, stopped, "the App to stop")
}
