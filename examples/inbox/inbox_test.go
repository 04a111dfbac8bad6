package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
	"github.com/settlehq/settle/dialect-postgres"
	"github.com/settlehq/settle/dialect-sqlite"
	"github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-nats"
)

// database is the service's own database on one server: a dialect and a pool.
type database struct {
	d  sqlqueue.Dialect
	db sqlqueue.DB
}

func uniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func onSQLite(t *testing.T) database {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "payments.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return database{db.Dialect(), db.Queue()}
}

func onPostgres(t *testing.T) database {
	ctx := context.Background()
	url := coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		coretest.ServerUnavailable(t, "PostgreSQL", url+" (SETTLE_TEST_PG_URL)", err)
	}
	schema := uniqueName("inbox_")
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, url+"&search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	return database{db.Dialect(), db.Queue()}
}

func onMariaDB(t *testing.T) database {
	dsn := coretest.Env("SETTLE_TEST_MARIADB_URL", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
	return onMySQLFamily(t, dsn, "MariaDB", "SETTLE_TEST_MARIADB_URL")
}

// onMySQL runs on a MySQL 8 server named by SETTLE_TEST_MYSQL_URL, and skips without one (none
// is installed in CI; not a failure under SETTLE_REQUIRE_SERVERS=1).
func onMySQL(t *testing.T) database {
	dsn := os.Getenv("SETTLE_TEST_MYSQL_URL")
	if dsn == "" {
		t.Skip("SETTLE_TEST_MYSQL_URL is not set: no MySQL 8 server to run on")
	}
	return onMySQLFamily(t, dsn, "MySQL", "SETTLE_TEST_MYSQL_URL")
}

func onMySQLFamily(t *testing.T, dsn, what, env string) database {
	ctx := context.Background()
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s %q: %v", env, dsn, err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		coretest.ServerUnavailable(t, what, cfg.Addr+" ("+env+")", err)
	}
	name := uniqueName("settle_inbox_")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = name, true, time.UTC
	db, err := mysql.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		admin.Close()
	})
	return database{db.Dialect(), db.Queue()}
}

var databases = []struct {
	name string
	open func(t *testing.T) database
}{{"sqlite", onSQLite}, {"postgres", onPostgres}, {"mariadb", onMariaDB}, {"mysql", onMySQL}}

// lostAcks stands for a process that dies between the inbox's commit and the acknowledgement:
// the first delivery of every message in lose has its effects committed, and then fails
// instead of being acknowledged, so that the transport delivers it again.
type lostAcks struct {
	mu   sync.Mutex
	lose map[string]bool
}

func (l *lostAcks) middleware(next core.HandlerFunc) core.HandlerFunc {
	return func(ctx context.Context, d core.Delivery) error {
		err := next(ctx, d)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err == nil && l.lose[d.ID()] {
			delete(l.lose, d.ID())
			return errors.New("the process died before the ack")
		}
		return err
	}
}

// relayed counts the receipts the outbox relayed, by payment.
type relayed struct {
	mu sync.Mutex
	by map[string]int
	n  chan struct{}
}

func newRelayed() *relayed { return &relayed{by: map[string]int{}, n: make(chan struct{}, 1024)} }

func (r *relayed) Publish(_ context.Context, dest string, payload []byte, _ map[string]string) error {
	var rc Receipt
	if err := core.JSON.Unmarshal(payload, &rc); err != nil {
		return err
	}
	r.mu.Lock()
	r.by[rc.Payment]++
	r.mu.Unlock()
	r.n <- struct{}{}
	return nil
}

const payments = 30

// checkOnce asserts the ledger holds each payment once and the relay sent each receipt once.
func checkOnce(t *testing.T, s *Service, rel *relayed) {
	t.Helper()
	for range payments {
		select {
		case <-rel.n:
		case <-time.After(coretest.WaitTimeout):
			t.Fatalf("the outbox relayed %d receipts of %d", len(rel.by), payments)
		}
	}
	booked, err := s.Booked(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rel.mu.Lock()
	defer rel.mu.Unlock()
	for i := range payments {
		id := "pay-" + strconv.Itoa(i)
		if booked[id] != 1 || rel.by[id] != 1 {
			t.Errorf("%s: booked %d times, receipt relayed %d times; want once each", id, booked[id], rel.by[id])
		}
	}
	if len(booked) != payments {
		t.Errorf("%d payments booked, want %d", len(booked), payments)
	}
}

// TestInboxOnTheInMemoryBroker: every third payment's ack is lost after its commit and one
// payment is published twice; on each database the ledger and the relayed receipts hold each
// payment once, and the inbox counted the redeliveries as duplicates.
func TestInboxOnTheInMemoryBroker(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			on := db.open(t)
			h := coretest.New(t)
			rel := newRelayed()
			// The relay paces itself and sweeps on its clock: the real one here, as the
			// harness's virtual clock stands still.
			s, err := NewService(context.Background(), h.App, clock.Real(), on.d, on.db, "", rel, slog.New(h.Logs))
			if err != nil {
				t.Fatal(err)
			}
			lost := &lostAcks{lose: map[string]bool{}}
			for i := 0; i < payments; i += 3 {
				lost.lose["pay-"+strconv.Itoa(i)] = true
			}
			if err := s.Subscribe(h.App, h.Broker.Queue("payments"), core.Use(lost.middleware)); err != nil {
				t.Fatal(err)
			}
			h.Start()
			pub, _ := core.NewPublisher[Payment](h.Broker.Queue("payments"))
			for i := range payments {
				id := "pay-" + strconv.Itoa(i)
				if _, err := pub.Publish(context.Background(), Payment{ID: id, Amount: 10 + i}, core.MessageID(id)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := pub.Publish(context.Background(), Payment{ID: "pay-1", Amount: 11}, core.MessageID("pay-1")); err != nil {
				t.Fatal(err)
			}
			h.WaitFor(func(all []core.Settlement) bool { return acks(all) == payments+1 })
			checkOnce(t, s, rel)
			if st := s.Inbox.Stats(); st.Recorded != payments || st.Duplicates != 1+(payments+2)/3 {
				t.Errorf("inbox stats %+v, want %d recorded and %d duplicates", st, payments, 1+(payments+2)/3)
			}
		})
	}
}

func acks(all []core.Settlement) int {
	n := 0
	for _, s := range all {
		if s.Verdict.Action == core.ActAck && s.Err == nil {
			n++
		}
	}
	return n
}

// broker is one real transport of the test: the endpoints of a queue (and of its dead letter,
// for a dead-letter kind) registered with the App, and the publish of a payment with an id.
type broker struct {
	ep, dead core.Endpoint
	deadOpt  core.Option
	publish  func(ctx context.Context, p Payment) error
	// dupDelivered: a second publish with the same id is delivered (RabbitMQ); JetStream's
	// duplicate window drops it instead.
	dupDelivered bool
}

// TestInboxOnRabbitMQ: the lost acks through the real RabbitMQ consumer, on a classic queue
// (they come back as retry copies) and a quorum queue (as requeued messages); on a classic
// queue whose cap is one attempt the lost ack moves the message to its dead letter, and the
// dead-letter queue's subscription behind the same inbox finds it processed.
func TestInboxOnRabbitMQ(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	admin, err := amqp.URL(url)()
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", url+" (SETTLE_TEST_AMQP_URL)", err)
	}
	defer admin.Close()
	for _, kind := range []string{"classic", "quorum", "dead-letter"} {
		for _, db := range databases {
			t.Run(kind+"/"+db.name, func(t *testing.T) {
				runBroker(t, db.open(t), func(app *core.App, log *slog.Logger) broker {
					return rabbitMQ(t, app, log, url, kind, admin)
				})
			})
		}
	}
}

func rabbitMQ(t *testing.T, app *core.App, log *slog.Logger, url, kind string, admin amqp.Connection) broker {
	queue := uniqueName("settle.inbox.")
	t.Cleanup(func() {
		if ch, err := admin.Channel(); err == nil {
			for _, q := range []string{queue, queue + amqp.RetrySuffix, queue + ".dead"} {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			ch.Close()
		}
	})
	b, err := amqp.New(amqp.URL(url), amqp.DeclareTopology(true), amqp.WithLogger(log), amqp.WithClock(app.Clock()))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(b)
	out := broker{dupDelivered: true, publish: func(ctx context.Context, p Payment) error {
		return amqp.Publish(ctx, b, "", queue, p, amqp.WithMessageID(p.ID), amqp.WithConfirm())
	}}
	if kind == "quorum" {
		out.ep, err = amqp.Quorum(b, queue)
	} else {
		out.ep, err = amqp.Classic(b, queue)
	}
	if err != nil {
		t.Fatal(err)
	}
	if kind == "dead-letter" {
		out.deadOpt = core.DeadLetterAfter(1, queue+".dead")
		if out.dead, err = amqp.Classic(b, queue+".dead"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestInboxOnNATS: the same through the real JetStream consumer: the lost acks come back as
// -NAKed messages; with a cap of one attempt, from the dead letter's stream.
func TestInboxOnNATS(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_NATS_URL", "nats://127.0.0.1:4222")
	probe, err := natsjs.New(url)
	if err == nil {
		_, err = probe.JetStream()
	}
	if err != nil {
		coretest.ServerUnavailable(t, "NATS with JetStream", url+" (SETTLE_TEST_NATS_URL)", err)
	}
	defer probe.Close()
	for _, kind := range []string{"retry", "dead-letter"} {
		for _, db := range databases {
			t.Run(kind+"/"+db.name, func(t *testing.T) {
				runBroker(t, db.open(t), func(app *core.App, log *slog.Logger) broker {
					return jetStream(t, app, log, url, kind, probe)
				})
			})
		}
	}
}

func jetStream(t *testing.T, app *core.App, log *slog.Logger, url, kind string, probe *natsjs.Conn) broker {
	subject := uniqueName("settle_inbox_")
	t.Cleanup(func() {
		js, err := probe.JetStream()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range []string{subject, subject + "_dead"} {
			_ = js.DeleteStream(ctx, s)
		}
	})
	c, err := natsjs.New(url, natsjs.DeclareTopology(true), natsjs.WithLogger(log), natsjs.WithClock(app.Clock()))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(c)
	out := broker{publish: func(ctx context.Context, p Payment) error {
		_, err := natsjs.Publish(ctx, c, subject, p, natsjs.WithMsgID(p.ID))
		return err
	}}
	if out.ep, err = natsjs.NewQueue(c, subject); err != nil {
		t.Fatal(err)
	}
	if kind == "dead-letter" {
		out.deadOpt = core.DeadLetterAfter(1, subject+"_dead")
		if out.dead, err = natsjs.NewQueue(c, subject+"_dead"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runBroker runs the service behind a real transport that open sets up, losing every third
// payment's ack after its commit and publishing one payment twice: the ledger and the relayed
// receipts hold each payment once.
func runBroker(t *testing.T, on database, open func(app *core.App, log *slog.Logger) broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*coretest.WaitTimeout)
	defer cancel()
	logs := &coretest.Logs{}
	settled := make(chan core.Settlement, 4*payments)
	app := core.New(core.WithLogger(slog.New(logs)), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) { settled <- s }))
	b := open(app, slog.New(logs))
	rel := newRelayed()
	s, err := NewService(ctx, app, app.Clock(), on.d, on.db, "", rel, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostAcks{lose: map[string]bool{}}
	for i := 0; i < payments; i += 3 {
		lost.lose["pay-"+strconv.Itoa(i)] = true
	}
	opts := []core.Option{core.Use(lost.middleware)}
	if b.dead != nil {
		opts = append(opts, b.deadOpt)
		if err := s.Subscribe(app, b.dead); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Subscribe(app, b.ep, opts...); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	}
	for i := range payments {
		if err := b.publish(ctx, Payment{ID: "pay-" + strconv.Itoa(i), Amount: 10 + i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.publish(ctx, Payment{ID: "pay-1", Amount: 11}); err != nil {
		t.Fatal(err)
	}
	// Acknowledged: every payment once (a lost ack's message on its redelivery, or from the
	// dead letter), and the duplicate publish where it is delivered.
	want, dups := payments, (payments+2)/3
	if b.dupDelivered {
		want, dups = want+1, dups+1
	}
	waitAcks(t, ctx, settled, ran, want)
	checkOnce(t, s, rel)
	if st := s.Inbox.Stats(); st.Recorded != payments || st.Duplicates != int64(dups) {
		t.Errorf("inbox stats %+v, want %d recorded and %d duplicates", st, payments, dups)
	}
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

// waitAcks waits for want successful acknowledgements.
func waitAcks(t *testing.T, ctx context.Context, settled <-chan core.Settlement, ran <-chan error, want int) {
	t.Helper()
	for n := 0; n < want; {
		select {
		case st := <-settled:
			if st.Verdict.Action == core.ActAck && st.Err == nil {
				n++
			}
		case err := <-ran:
			t.Fatalf("Run ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d acknowledgements of %d", n, want)
		}
	}
}
