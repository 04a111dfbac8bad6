package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-postgres"
	"github.com/settlehq/settle/dialect-sqlite"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// relayEnv is one database and one RabbitMQ for the outbox-over-RabbitMQ cases.
type relayEnv struct {
	d      sqlqueue.Dialect
	db     sqlqueue.DB
	dial   amqp.DialFunc
	queue  string // the payouts queue on RabbitMQ, unique per test
	outbox string // the outbox table
	ledger string
	broker *amqp.Broker // the last App's broker, for the test's own declares
}

func (e *relayEnv) ph(n int) string { return e.d.Placeholder(n) }

func (e *relayEnv) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (e *relayEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	rows, err := e.db.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (e *relayEnv) booked(t *testing.T, order string) int {
	return e.count(t, "SELECT COUNT(*) FROM "+e.ledger+" WHERE order_id = "+e.ph(1), order)
}

// relayApp is one running App: broker, outbox and the payouts receiver on RabbitMQ.
type relayApp struct {
	box     *outbox.Outbox
	acked   atomic.Int64
	settled chan struct{}
	logs    logSignal
	stop    func()
}

func (e *relayEnv) start(t *testing.T) *relayApp {
	t.Helper()
	logs := newLogSignal()
	log := slog.New(logs)
	r := &relayApp{settled: make(chan struct{}, 1), logs: logs}
	app := core.New(core.WithLogger(log), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) {
		if s.Verdict.Action == core.ActAck && s.Err == nil {
			r.acked.Add(1)
		}
		select {
		case r.settled <- struct{}{}:
		default:
		}
	}))
	b, err := amqp.New(e.dial, amqp.DeclareTopology(true), amqp.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	e.broker = b
	app.Register(b)
	r.box, err = outbox.New(e.d, e.db, outbox.StandardTable(e.outbox), amqp.OutboxPublisher(b, "", e.queue+"-"),
		outbox.WithLogger(log), outbox.Destinations(e.queue))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(r.box)
	q, err := amqp.Classic(b, e.queue)
	if err != nil {
		t.Fatal(err)
	}
	// The handler books the payout and marks the record in its own transaction.
	handle := func(ctx context.Context, m *core.Message[Payout]) error {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO "+e.ledger+" (order_id, cents) VALUES ("+e.ph(1)+", "+e.ph(2)+")",
			m.Payload.Order, m.Payload.Cents); err != nil {
			return err
		}
		if err := outbox.Processed(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := core.Subscribe(app, q, handle, r.box.Receiver(), core.DeadLetterAfter(5, e.queue+".dead")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

func (r *relayApp) waitAcked(t *testing.T, n int64) {
	t.Helper()
	timeout := time.After(coretest.WaitTimeout)
	for r.acked.Load() < n {
		select {
		case <-r.settled:
		case <-timeout:
			t.Fatalf("%d acks after %v, want %d; warnings: %+v", r.acked.Load(), coretest.WaitTimeout, n, r.logs.Records(slog.LevelWarn))
		}
	}
}

func (e *relayEnv) order(t *testing.T, box *outbox.Outbox, id string, send bool) outbox.Batch {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := box.RecordJSON(ctx, tx, e.queue, Payout{Order: id, Cents: 250}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if send {
		if err := box.Send(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	return batch
}

// runRelay is the body every database × RabbitMQ pairing runs.
func runRelay(t *testing.T, e *relayEnv) {
	ddl, err := outbox.DDL(e.d, e.outbox)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, ddl)
	e.exec(t, "CREATE TABLE "+e.ledger+" (order_id VARCHAR(64) NOT NULL, cents BIGINT NOT NULL)")

	a := e.start(t)
	ctx := context.Background()

	// Commit, then send: booked once; the record relayed again (as after a crash between its
	// confirmed publish and its mark) is acknowledged unhandled.
	e.order(t, a.box, "o-1", true)
	a.waitAcked(t, 1)
	e.exec(t, "UPDATE "+e.outbox+" SET published_at = NULL")
	if n, err := a.box.PublishPending(ctx); err != nil || n != 1 {
		t.Fatalf("PublishPending: %d, %v", n, err)
	}
	a.waitAcked(t, 2)
	if n := e.booked(t, "o-1"); n != 1 {
		t.Fatalf("o-1 booked %d times", n)
	}
	if len(a.logs.Find("outbox receiver: record already processed; duplicate acknowledged without the handler")) != 1 {
		t.Fatal("duplicate not suppressed")
	}

	// A rollback records and sends nothing.
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.box.RecordJSON(ctx, tx, e.queue, Payout{Order: "o-rolled-back"}, nil); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	if n := e.count(t, "SELECT COUNT(*) FROM "+e.outbox); n != 1 {
		t.Fatalf("%d records after a rollback, want the 1 of o-1", n)
	}

	// An unknown destination is refused when recording.
	if _, err := a.box.RecordJSON(ctx, e.db, "nowhere", Payout{}, nil); err == nil || !strings.Contains(err.Error(), `unknown destination "nowhere"`) {
		t.Fatalf("unknown destination: %v", err)
	}

	// Committed but never sent (the process died in between): the next start publishes it.
	e.order(t, a.box, "o-2", false)
	a.stop()
	b := e.start(t)
	b.waitAcked(t, 1)
	// The receiver may ack before the relay has marked what it published: wait for the relay.
	b.logs.wait(t, "outbox: relayed the unpublished records at start")
	if n := e.booked(t, "o-2"); n != 1 {
		t.Fatalf("o-2 booked %d times after restart", n)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM "+e.outbox+" WHERE processed_at IS NULL OR published_at IS NULL"); n != 0 {
		t.Fatalf("%d unprocessed or unpublished records", n)
	}
}

// TestRelaySQLiteAmqptest runs the outbox over the in-process RabbitMQ with SQLite.
func TestRelaySQLiteAmqptest(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	broker := amqptest.NewBroker(clock.Real())
	runRelay(t, &relayEnv{d: db.Dialect(), db: db.Queue(), dial: broker.Dial,
		queue: "payouts", outbox: "outbox", ledger: "ledger"})
}

// TestRelayPostgresRabbitMQ runs the outbox over the real RabbitMQ with PostgreSQL.
func TestRelayPostgresRabbitMQ(t *testing.T) {
	e := realEnv(t)
	runRelay(t, e)
}

// TestRelayNackKeepsRecord publishes to a queue that refuses publishes (x-overflow
// reject-publish at length 0): RabbitMQ nacks, Send fails, the record stays unprocessed.
func TestRelayNackKeepsRecord(t *testing.T) {
	e := realEnv(t)
	ddl, err := outbox.DDL(e.d, e.outbox)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, ddl)
	ctx := context.Background()
	conn, err := e.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(e.queue, false, true, false, false, amqp091.Table{"x-max-length": int32(0), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(e.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	box, err := outbox.New(e.d, e.db, outbox.StandardTable(e.outbox), amqp.OutboxPublisher(b, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := box.RecordJSON(ctx, e.db, e.queue, Payout{Order: "o-nack"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Send(ctx, batch); err == nil {
		t.Fatal("a nacked publish was taken as sent")
	}
	if n := e.count(t, "SELECT COUNT(*) FROM "+e.outbox+" WHERE published_at IS NULL"); n != 1 {
		t.Fatalf("%d unpublished records after a nack, want 1", n)
	}
}

var seq atomic.Int64

// realEnv connects to the real PostgreSQL (a fresh schema) and RabbitMQ (unique queue names),
// or skips with the reason (fails under SETTLE_REQUIRE_SERVERS=1).
func realEnv(t *testing.T) *relayEnv {
	t.Helper()
	ctx := context.Background()
	pgURL := coretest.PostgresURL()
	admin, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		coretest.ServerUnavailable(t, "PostgreSQL", pgURL, err)
	}
	schema := fmt.Sprintf("outbox_%d_%d", time.Now().UnixNano()%1e9, seq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	db, err := postgres.Open(ctx, pgURL+"&search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	amqpURL := coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	probe, err := amqp.Dial(amqpURL, amqp091.Config{})
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", amqpURL, err)
	}
	queue := "settle.outbox." + schema
	t.Cleanup(func() {
		if ch, err := probe.Channel(); err == nil {
			ch.QueueDelete(queue, false, false, false)
			ch.QueueDelete(queue+".dead", false, false, false)
		}
		probe.Close()
	})
	return &relayEnv{d: db.Dialect(), db: db.Queue(), dial: amqp.URL(amqpURL),
		queue: queue, outbox: "outbox", ledger: "ledger"}
}

// runCrossService is the outbox across services: the sender service records and relays to
// RabbitMQ and has no consumer; the receiver service consumes with its own Broker and has no
// outbox, no publisher and no access to the sender's database. Records whose Send was lost
// are relayed by the next start, and the sender's restarts publish nothing twice: the
// receiver sees each record once.
func runCrossService(t *testing.T, e *relayEnv) {
	ddl, err := outbox.DDL(e.d, e.outbox)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, ddl)

	// The receiver service: counts deliveries per outbox record id.
	var mu sync.Mutex
	seen := map[string]int{}
	delivered := make(chan string, 64)
	recvApp := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	rb, err := amqp.New(e.dial, amqp.DeclareTopology(true), amqp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	recvApp.Register(rb)
	q, err := amqp.Classic(rb, e.queue)
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(recvApp, q, func(_ context.Context, m *core.Message[Payout]) error {
		id := m.Headers()[outbox.HeaderID]
		mu.Lock()
		seen[id]++
		mu.Unlock()
		delivered <- m.Payload.Order
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stopRecv := runApp(t, recvApp)
	defer stopRecv()

	// The sender service, started four times.
	sender := func() (*outbox.Outbox, func()) {
		logs := newLogSignal()
		app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)))
		b, err := amqp.New(e.dial, amqp.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		app.Register(b)
		box, err := outbox.New(e.d, e.db, outbox.StandardTable(e.outbox), amqp.OutboxPublisher(b, "", e.queue+"-"),
			outbox.WithLogger(slog.New(logs)), outbox.Destinations(e.queue))
		if err != nil {
			t.Fatal(err)
		}
		app.Register(box)
		stop := runApp(t, app)
		logs.wait(t, "outbox: relayed the unpublished records at start")
		return box, stop
	}
	box, stop := sender()
	const orders = 10
	for i := range orders {
		e.order(t, box, "o-"+strconv.Itoa(i), i%3 != 0) // every third Send is lost
	}
	stop()
	for range 3 {
		_, stop := sender()
		stop()
	}
	box, stop = sender()
	e.order(t, box, "o-last", true)
	stop()
	// The queue is consumed in order: once o-last is in, everything before it is.
	for timeout := time.After(coretest.WaitTimeout); ; {
		select {
		case o := <-delivered:
			if o != "o-last" {
				continue
			}
		case <-timeout:
			t.Fatalf("o-last not delivered; seen %v", seen)
		}
		break
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != orders+1 {
		t.Fatalf("%d records received, want %d: %v", len(seen), orders+1, seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("record %s received %d times over five starts of the sender: %v", id, n, seen)
		}
	}
	if n := e.count(t, "SELECT COUNT(*) FROM "+e.outbox+" WHERE published_at IS NULL"); n != 0 {
		t.Fatalf("%d records unpublished", n)
	}
}

// runApp runs app until the returned stop is called (or the test ends).
func runApp(t *testing.T, app *core.App) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		cancel()
		t.Fatalf("Run: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestCrossServiceSQLiteAmqptest runs the cross-service outbox on SQLite and the in-process
// RabbitMQ.
func TestCrossServiceSQLiteAmqptest(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	broker := amqptest.NewBroker(clock.Real())
	runCrossService(t, &relayEnv{d: db.Dialect(), db: db.Queue(), dial: broker.Dial, queue: "payouts", outbox: "outbox"})
}

// TestCrossServicePostgresRabbitMQ runs it on PostgreSQL and the real RabbitMQ.
func TestCrossServicePostgresRabbitMQ(t *testing.T) {
	runCrossService(t, realEnv(t))
}
