package main

import (
	"bytes"
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

var (
	pgURL     = coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	mariadbDS = coretest.Env("SETTLE_TEST_MARIADB_URL", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
	amqpURL   = coretest.Env("SETTLE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	natsURL   = coretest.Env("SETTLE_TEST_NATS_URL", "nats://127.0.0.1:4222")
)

var seq atomic.Int64

// unique is a name no other test (or helper running tests at the same time) uses.
func unique(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano()%1e12, 36) + "_" + strconv.FormatInt(seq.Add(1), 10)
}

// fixture is one backend's queue and dead letter for the command's tests, with the backend's
// own client to fill them and count what they hold.
type fixture struct {
	name string
	// args are the target flags; target is the same as a --target string.
	args   []string
	target string
	// origin is the queue's name as dead letters record it.
	origin string
	// addDead stores a dead letter and returns its id.
	addDead func(t testing.TB, payload []byte, h map[string]string) string
	// queued and dead count the queue's ready messages and the dead letters, with the
	// backend's own client.
	queued, dead func(t testing.TB) int
	// queuedBodies reads the queue's payloads (RabbitMQ: without taking them).
	queuedBodies func(t testing.TB) [][]byte
	// addReady publishes a ready message to the queue (SQL fixtures).
	addReady func(t testing.TB, payload []byte)
}

func deadHeaders(origin, reason string, count int) map[string]string {
	return core.DeadLetterInfo{Count: count, Origin: origin, At: time.Now().Add(-90 * time.Second), Error: reason}.Headers()
}

// sqlFixture builds a fixture on a SQL queue table with a group column (the standard table)
// created by the dialect's DDL helper; count runs a COUNT(*) with the dialect's own client.
func sqlFixture(t testing.TB, name, dsn string, d sqlqueue.Dialect, db sqlqueue.DB, table string,
	count func(q string, args ...any) int, bodies func(q string, args ...any) [][]byte, ph func(int) string) *fixture {
	quote := d.Quote
	pub, err := sqlqueue.NewPublisher(d, db, sqlqueue.StandardTable(table), "refunds.dead")
	if err != nil {
		t.Fatal(err)
	}
	queuePub, err := sqlqueue.NewPublisher(d, db, sqlqueue.StandardTable(table), "refunds")
	if err != nil {
		t.Fatal(err)
	}
	countGroup := "SELECT COUNT(*) FROM " + quote(table) + " WHERE " + quote("grp") + " = " + ph(1) + " AND " + quote("processed_at") + " IS NULL"
	return &fixture{
		name:   name,
		args:   []string{"--dsn", dsn, "--table", table, "--queue", "refunds", "--dead", "refunds.dead"},
		target: dsn + sep(dsn) + "table=" + table + "&queue=refunds&dead=refunds.dead",
		origin: "refunds",
		addDead: func(t testing.TB, payload []byte, h map[string]string) string {
			id, err := pub.PublishRaw(context.Background(), payload, sqlqueue.WithHeaders(h))
			if err != nil {
				t.Fatal(err)
			}
			return strconv.FormatInt(id, 10)
		},
		addReady: func(t testing.TB, payload []byte) {
			if _, err := queuePub.PublishRaw(context.Background(), payload); err != nil {
				t.Fatal(err)
			}
		},
		queued: func(t testing.TB) int { return count(countGroup, "refunds") },
		dead:   func(t testing.TB) int { return count(countGroup, "refunds.dead") },
		queuedBodies: func(t testing.TB) [][]byte {
			return bodies("SELECT "+quote("payload")+" FROM "+quote(table)+" WHERE "+quote("grp")+" = "+ph(1)+" ORDER BY "+quote("id"), "refunds")
		},
	}
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

func sqliteFixture(t testing.TB) *fixture {
	path := t.TempDir() + "/queue.db"
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.CreateTable(context.Background(), sqlqueue.StandardTable("jobs")); err != nil {
		t.Fatal(err)
	}
	return sqlFixture(t, "sqlite", "sqlite://"+path, db.Dialect(), db.Queue(), "jobs",
		stdCount(t, db.Pool()), stdBodies(t, db.Pool()), func(int) string { return "?" })
}

func stdCount(t testing.TB, db *sql.DB) func(string, ...any) int {
	return func(q string, args ...any) int {
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
}

func stdBodies(t testing.TB, db *sql.DB) func(string, ...any) [][]byte {
	return func(q string, args ...any) [][]byte {
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var out [][]byte
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
}

func postgresFixture(t testing.TB) *fixture {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgURL)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(t, "PostgreSQL", pgURL+" (SETTLE_TEST_PG_URL)", err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	table := unique("settle_cli_")
	if err := db.CreateTable(ctx, sqlqueue.StandardTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	count := func(q string, args ...any) int {
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	bodies := func(q string, args ...any) [][]byte {
		rows, err := pool.Query(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out [][]byte
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	return sqlFixture(t, "postgres", pgURL, db.Dialect(), db.Queue(), table, count, bodies, func(n int) string { return "$" + strconv.Itoa(n) })
}

func mariadbFixture(t testing.TB) *fixture {
	ctx := context.Background()
	db, err := mysql.Open(ctx, mariadbDS)
	if err != nil {
		coretest.ServerUnavailable(t, "MariaDB", mariadbDS+" (SETTLE_TEST_MARIADB_URL)", err)
	}
	t.Cleanup(func() { db.Close() })
	table := unique("settle_cli_")
	if err := db.CreateTable(ctx, sqlqueue.StandardTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Pool().Exec("DROP TABLE IF EXISTS " + table) })
	return sqlFixture(t, "mariadb", "mysql://"+mariadbDS, db.Dialect(), db.Queue(), table,
		stdCount(t, db.Pool()), stdBodies(t, db.Pool()), func(int) string { return "?" })
}

// rabbitFixture declares a queue and its dead-letter queue (classic, as DeclareTopology does).
func rabbitFixture(t testing.TB) *fixture {
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		coretest.ServerUnavailable(t, "RabbitMQ", amqpURL+" (SETTLE_TEST_AMQP_URL)", err)
	}
	t.Cleanup(func() { conn.Close() })
	queue := unique("payouts-")
	dead := queue + ".dead"
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{queue, dead} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	ch.Close()
	t.Cleanup(func() {
		if c, err := amqp091.Dial(amqpURL); err == nil {
			if ch, err := c.Channel(); err == nil {
				_, _ = ch.QueueDelete(queue, false, false, false)
				_, _ = ch.QueueDelete(dead, false, false, false)
			}
			c.Close()
		}
	})
	depth := func(t testing.TB, q string) int {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		qq, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return qq.Messages
	}
	var n atomic.Int64
	return &fixture{
		name:   "rabbitmq",
		args:   []string{"--dsn", amqpURL, "--queue", queue, "--dead", dead},
		target: amqpURL + "?queue=" + queue + "&dead=" + dead,
		origin: queue,
		addDead: func(t testing.TB, payload []byte, h map[string]string) string {
			id := "m-" + strconv.FormatInt(n.Add(1), 10)
			publishConfirmed(t, conn, dead, []amqp091.Publishing{{MessageId: id, Body: payload, Headers: amqpTable(h), DeliveryMode: amqp091.Persistent}})
			return id
		},
		queued: func(t testing.TB) int { return depth(t, queue) },
		dead:   func(t testing.TB) int { return depth(t, dead) },
		queuedBodies: func(t testing.TB) [][]byte {
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			var out [][]byte
			for {
				m, ok, err := ch.Get(queue, false)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					return out
				}
				out = append(out, m.Body)
			}
		},
	}
}

func amqpTable(h map[string]string) amqp091.Table {
	t := amqp091.Table{}
	for k, v := range h {
		t[k] = v
	}
	return t
}

// publishConfirmed publishes msgs to queue on a confirm channel and waits for every
// confirmation.
func publishConfirmed(t testing.TB, conn *amqp091.Connection, queue string, msgs []amqp091.Publishing) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var dcs []*amqp091.DeferredConfirmation
	for _, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if !dc.Wait() {
			t.Fatalf("publishing to %s: not confirmed", queue)
		}
	}
}

// natsFixture creates the queue's stream and the dead-letter stream (work-queue retention, as
// DeclareTopology does) on the real nats-server.
func natsFixture(t testing.TB) *fixture {
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err != nil {
		coretest.ServerUnavailable(t, "NATS", natsURL+" (SETTLE_TEST_NATS_URL)", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := unique("settle_cli_")
	subject, dead := name+".payouts", name+".payouts.dead"
	streams := map[string]string{subject: name + "_payouts", dead: name + "_payouts_dead"}
	for subj, st := range streams {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: st, Subjects: []string{subj}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), st) })
	}
	count := func(t testing.TB, subj string) int {
		st, err := js.Stream(ctx, streams[subj])
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		return int(info.State.Subjects[subj])
	}
	return &fixture{
		name:   "nats",
		args:   []string{"--dsn", natsURL, "--queue", subject, "--dead", dead},
		target: natsURL + "?queue=" + subject + "&dead=" + dead,
		origin: subject,
		addDead: func(t testing.TB, payload []byte, h map[string]string) string {
			msg := nats.NewMsg(dead)
			msg.Data = payload
			for k, v := range h {
				msg.Header.Set(k, v)
			}
			ack, err := js.PublishMsg(ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			return strconv.FormatUint(ack.Sequence, 10)
		},
		queued: func(t testing.TB) int { return count(t, subject) },
		dead:   func(t testing.TB) int { return count(t, dead) },
	}
}

var fixtures = []struct {
	name string
	make func(testing.TB) *fixture
}{
	{"sqlite", sqliteFixture},
	{"postgres", postgresFixture},
	{"mariadb", mariadbFixture},
	{"rabbitmq", rabbitFixture},
	{"nats", natsFixture},
}

// settle runs the command in process and returns its exit code, stdout and stderr.
func settle(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}
