package bench

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
)

// wmMyConns is the size of every contender's pool (open and idle alike): the 8 publishing
// goroutines and up to 4 subscribers never wait for a connection, and none is reopened.
const wmMyConns = 16

// BenchmarkWatermillMySQL is BenchmarkWatermillPostgres on MariaDB (or MySQL): each contender
// publishes N 200-byte messages through a Watermill Publisher (one message per Publish, 8
// goroutines) into a fresh database of its own, then drains them through its Subscriber(s),
// acknowledging each; rounds interleave the contenders, and each database is dropped after its
// round.
//
//   - watermill-sql (offsets): watermill-sql v4's DefaultMySQLSchema (a LONGBLOB payload: the
//     bodies are not JSON) and DefaultMySQLOffsetsAdapter, consumer group "bench", its default
//     batch of 100 rows, on a go-sql-driver pool opened by sql.Open (driver defaults: server
//     isolation, prepared statements; watermill-sql's subscriber asks for SERIALIZABLE).
//   - watermill-sql (queue, delete on ack): MySQLQueueSchema and MySQLQueueOffsetsAdapter with
//     DeleteOnAck, the same pool settings: watermill-sql's queue that removes acknowledged rows,
//     as settle does.
//   - settlewatermill lease, 1 and 4 subscribers: the adapter on dialect-mysql's lease form (one
//     queue table with a group per topic, claims of 100 rows), on a pool opened by mysql.Open
//     (READ COMMITTED sessions, client-side interpolation).
//   - settle lease, defaults: settle without Watermill, for reference: mysql.NewPublisher's
//     PublishRaw from the same 8 goroutines, then one subscription with no option (one worker,
//     the default claim size) on the lease form; a message counts as drained when the App's
//     observer sees its ack settled.
//
// Every pool holds wmMyConns connections. Commits are durable on the server's defaults
// (innodb_flush_log_at_trx_commit=1).
//
//	SETTLE_BENCH_WATERMILL_N=5000 SETTLE_BENCH_WATERMILL_ROUNDS=3 \
//	  go test -run '^$' -bench 'BenchmarkWatermillMySQL$' -benchtime 1x ./bench
//
// SETTLE_TEST_MARIADB_URL picks the server; SETTLE_BENCH_WATERMILL_WHO=settle picks
// contenders by name.
func BenchmarkWatermillMySQL(b *testing.B) {
	admin, cfg := myAdminOrSkip(context.Background(), b)
	defer admin.Close()
	// fresh creates a database for one contender's round and returns its DSN and its removal.
	fresh := func(ctx context.Context) (string, func(), error) {
		name := "settle_wmbench_" + wmSuffix()
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			return "", nil, err
		}
		dcfg := cfg.Clone()
		dcfg.DBName = name
		return dcfg.FormatDSN(), func() {
			if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
				b.Errorf("drop database %s: %v", name, err)
			}
		}, nil
	}
	sized := func(p *sql.DB) *sql.DB {
		p.SetMaxOpenConns(wmMyConns)
		p.SetMaxIdleConns(wmMyConns)
		return p
	}
	blob := func(string) string { return "LONGBLOB" }
	watermillSQL := func(schema wsql.SchemaAdapter, offsets wsql.OffsetsAdapter, group string) func(ctx context.Context, topic string) (*wmPubSub, error) {
		return func(ctx context.Context, topic string) (*wmPubSub, error) {
			dsn, drop, err := fresh(ctx)
			if err != nil {
				return nil, err
			}
			p, err := sql.Open("mysql", dsn)
			if err != nil {
				drop()
				return nil, err
			}
			db := wsql.BeginnerFromStdSQL(sized(p))
			cleanup := func() { _ = p.Close(); drop() }
			pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, watermill.NopLogger{})
			if err != nil {
				cleanup()
				return nil, err
			}
			sub, err := wsql.NewSubscriber(db, wsql.SubscriberConfig{ConsumerGroup: group, SchemaAdapter: schema,
				OffsetsAdapter: offsets, InitializeSchema: true}, watermill.NopLogger{})
			if err != nil {
				cleanup()
				return nil, err
			}
			return &wmPubSub{pub: pub, subs: []message.Subscriber{sub}, cleanup: cleanup}, nil
		}
	}
	// settleDB opens settle's DB on a fresh database, sized like the peer's pool; the pub/sub's
	// cleanup closes it and drops the database.
	settleDB := func(ctx context.Context) (*mysql.DB, *wmPubSub, error) {
		dsn, drop, err := fresh(ctx)
		if err != nil {
			return nil, nil, err
		}
		db, err := mysql.Open(ctx, dsn)
		if err != nil {
			drop()
			return nil, nil, err
		}
		sized(db.Pool())
		return db, &wmPubSub{cleanup: func() { _ = db.Close(); drop() }}, nil
	}
	quiet := slog.New(slog.DiscardHandler)
	adapter := func(subs int) func(ctx context.Context, topic string) (*wmPubSub, error) {
		return func(ctx context.Context, topic string) (*wmPubSub, error) {
			db, ps, err := settleDB(ctx)
			if err != nil {
				return nil, err
			}
			t := sqlqueue.StandardTable(topic)
			t.Columns.ProcessedAt = ""
			topics, err := settlewatermill.SQL(db, t, mysql.Lease, mysql.NewPublisher, settlewatermill.CreateTables())
			if err == nil {
				ps.pub, err = settlewatermill.NewPublisher(topics)
			}
			for i := 0; err == nil && i < subs; i++ {
				var sub *settlewatermill.Subscriber
				// Claims of 100 rows, as watermill-sql's SubscribeBatchSize default.
				sub, err = settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(quiet),
					settlewatermill.Mount(sqlqueue.BatchSize(100)))
				ps.subs = append(ps.subs, sub)
			}
			if err != nil {
				ps.cleanup()
				return nil, err
			}
			return ps, nil
		}
	}
	native := func(ctx context.Context, topic string) (*wmPubSub, error) {
		db, ps, err := settleDB(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := db.Pool().ExecContext(ctx, myBenchDDL); err != nil {
			ps.cleanup()
			return nil, err
		}
		p, err := mysql.NewPublisher(db, myQueueTable(), "")
		if err != nil {
			ps.cleanup()
			return nil, err
		}
		ps.pub = settleRawPublisher{p}
		ps.subs = []message.Subscriber{&settleNativeSubscriber{db: db}}
		return ps, nil
	}
	wmBench(b, "SETTLE_BENCH_WATERMILL_WHO", "mariadb", []wmContender{
		{"watermill-sql (offsets)", "", watermillSQL(wsql.DefaultMySQLSchema{GeneratePayloadType: blob}, wsql.DefaultMySQLOffsetsAdapter{}, "bench")},
		{"watermill-sql (queue, delete on ack)", "", watermillSQL(wsql.MySQLQueueSchema{GeneratePayloadType: blob}, wsql.MySQLQueueOffsetsAdapter{DeleteOnAck: true}, "")},
		{"settlewatermill lease, 1 subscriber", "watermill-sql (offsets)", adapter(1)},
		{"settlewatermill lease, 4 subscribers", "watermill-sql (offsets)", adapter(4)},
		{"settle lease, defaults (no Watermill)", "watermill-sql (offsets)", native},
	})
}

// settleRawPublisher publishes each Watermill message's payload with settle's own publisher
// (one INSERT per message), for the settle contender that does not go through Watermill.
type settleRawPublisher struct{ p *sqlqueue.Publisher }

func (s settleRawPublisher) Publish(_ string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if _, err := s.p.PublishRaw(context.Background(), m.Payload); err != nil {
			return err
		}
	}
	return nil
}

func (settleRawPublisher) Close() error { return nil }

// settleNativeSubscriber runs one settle subscription with no option on the lease form of
// myBenchDDL's table and hands wmRun a message for each settled ack (its Ack does nothing):
// the drain is timed to the N-th durable settlement, as the other settle benchmarks are.
type settleNativeSubscriber struct {
	db   *mysql.DB
	stop context.CancelFunc
	ran  chan error
}

func (s *settleNativeSubscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	if s.stop != nil {
		return nil, errors.New("settleNativeSubscriber: subscribed twice")
	}
	runCtx, stop := context.WithCancel(ctx)
	out := make(chan *message.Message, 1024)
	var mu sync.Mutex
	closed := false
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(st core.Settlement) {
			if st.Err != nil {
				return // never counted: wmRun times out and reports it
			}
			mu.Lock()
			defer mu.Unlock()
			if closed {
				return
			}
			select {
			case out <- message.NewMessage("", nil):
			case <-runCtx.Done():
			}
		}))
	ep, err := mysql.Lease(s.db, myQueueTable(), "")
	if err == nil {
		err = core.Subscribe(app, ep, func(context.Context, *core.Message[[]byte]) error { return nil }, core.WithCodec(core.Raw))
	}
	if err != nil {
		stop()
		return nil, err
	}
	s.stop, s.ran = stop, make(chan error, 1)
	go func() {
		err := app.Run(runCtx)
		mu.Lock()
		closed = true
		close(out)
		mu.Unlock()
		s.ran <- err
	}()
	return out, nil
}

func (s *settleNativeSubscriber) Close() error {
	if s.stop == nil {
		return nil
	}
	s.stop()
	return <-s.ran
}
