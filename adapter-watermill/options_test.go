package settlewatermill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/rabbitmq/amqp091-go"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// TestFanOutNamesTheGroupsTableAndQueues: ConsumerGroupsTable names the table FanOut registers
// groups in, and QueueName the queue (the group column's value) each group's rows go to; by
// default they are the queue table's name + "_consumer_groups" and DefaultQueueName.
func TestFanOutNamesTheGroupsTableAndQueues(t *testing.T) {
	s := newSQLite(t, settlewatermill.FanOut(), settlewatermill.ConsumerGroupsTable("wm_groups"),
		settlewatermill.QueueName(func(topic, group string) string { return group + "@" + topic }))
	_, msgs := s.subscribe(t, "orders", settlewatermill.ConsumerGroup("billing"))
	if err := s.pub.Publish("orders", message.NewMessage("o1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, msgs); m.UUID != "o1" {
		t.Fatalf("received %s, want o1", m.UUID)
	} else {
		m.Ack()
	}
	var topic, group string
	if err := s.db.Pool().QueryRow(`SELECT topic, consumer_group FROM wm_groups`).Scan(&topic, &group); err != nil {
		t.Fatalf("the consumer group is not registered in wm_groups: %v", err)
	}
	if topic != "orders" || group != "billing" {
		t.Fatalf("wm_groups holds (%q, %q), want (orders, billing)", topic, group)
	}
	var n int
	if err := s.db.Pool().QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'wm_consumer_groups'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the default groups table exists too (%d, %v)", n, err)
	}
	// A second message, left unacknowledged, shows the queue's name in its row.
	if err := s.pub.Publish("orders", message.NewMessage("o2", []byte("y"))); err != nil {
		t.Fatal(err)
	}
	receive(t, msgs) // in hand, not acked: the row stays
	rows := s.rows(t)
	if len(rows) != 1 || rows[0].grp != "billing@orders" {
		t.Fatalf("rows %+v, want one in queue billing@orders", rows)
	}
	if got := settlewatermill.DefaultQueueName("orders", "billing"); got != "orders.billing" {
		t.Fatalf("DefaultQueueName = %q, want orders.billing", got)
	}
}

func TestSQLOptionRefusals(t *testing.T) {
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/refusals.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for name, opt := range map[string]settlewatermill.SQLOption{
		"ConsumerGroupsTable(\"bad name\")": settlewatermill.ConsumerGroupsTable("bad name"),
		"QueueName(nil)":                    settlewatermill.QueueName(nil),
	} {
		_, err := settlewatermill.SQL(db, queueTable("wm"), sqlite.Lease, sqlite.NewPublisher, opt)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(name, "(", 2)[0]) {
			t.Errorf("%s: %v, want an error naming the option", name, err)
		}
	}
}

// TestWithClockTimesRedeliveries: a Subscriber's subscriptions take their time from WithClock:
// RedeliveryDelay's retry_after is the virtual clock's now + d, whatever the wall clock says.
func TestWithClockTimesRedeliveries(t *testing.T) {
	s := newSQLite(t)
	vc := clock.NewVirtual(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, msgs := s.subscribe(t, "jobs", settlewatermill.WithClock(vc), settlewatermill.RedeliveryDelay(time.Hour))
	receive(t, msgs).Nack()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	rows := s.rows(t)
	if len(rows) != 1 || !rows[0].retryAfter.Valid {
		t.Fatalf("rows %+v, want one with a retry_after", rows)
	}
	at, err := sqlite.ParseTime(rows[0].retryAfter.String)
	if err != nil {
		t.Fatal(err)
	}
	if want := vc.Now().Add(time.Hour); !at.Equal(want) {
		t.Fatalf("retry_after %v, want the virtual clock's %v", at, want)
	}
	if _, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.WithClock(nil)); err == nil {
		t.Fatal("WithClock(nil) was accepted")
	}
}

// TestCloseTimeoutBoundsAStuckStop: a settlement that cannot finish (another connection holds
// the database's write lock) cannot hold Close past CloseTimeout's stages; without the option
// Close would wait 30 s per stage.
func TestCloseTimeoutBoundsAStuckStop(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, msgs := s.subscribe(t, "jobs", settlewatermill.CloseTimeout(100*time.Millisecond))
	m := receive(t, msgs)
	lock, err := s.db.Pool().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_, _ = lock.ExecContext(context.Background(), "ROLLBACK")
			_ = lock.Close()
		}
	}
	t.Cleanup(release)
	m.Ack() // its settlement waits for the lock
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	select {
	case <-closed:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("Close did not return within the wait timeout with CloseTimeout(100ms) while a settlement was stuck")
	}
	release()
	if _, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.CloseTimeout(0)); err == nil || !strings.Contains(err.Error(), "CloseTimeout") {
		t.Fatalf("CloseTimeout(0): %v, want an error naming it", err)
	}
}

// TestAMQPQueueNameNamesGroupQueues: on RabbitMQ with AMQPFanOut, each consumer group's queue is
// named by AMQPQueueName.
func TestAMQPQueueNameNamesGroupQueues(t *testing.T) {
	url := coretest.Env("SETTLE_TEST_AMQP_URL", amqpDefault)
	suffix := strings.ReplaceAll(t.Name(), "/", "_") + "_" + time.Now().Format("150405.000000")
	queue := "grp-billing." + suffix
	t.Cleanup(func() {
		if t.Skipped() {
			return
		}
		conn, err := amqp091.Dial(url)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			_ = ch.ExchangeDelete("orders."+suffix, false, false)
			_ = ch.Close()
		}
	})
	b := rabbitBroker(t, url)
	topics, err := settlewatermill.AMQP(b, settlewatermill.Classic(), settlewatermill.AMQPFanOut(),
		settlewatermill.AMQPQueueName(func(topic, group string) string {
			return "grp-" + group + "." + strings.TrimPrefix(topic, "orders.")
		}))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(suiteLogger()), settlewatermill.ConsumerGroup("billing"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	msgs, err := sub.Subscribe(t.Context(), "orders."+suffix)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := settlewatermill.NewPublisher(topics)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("orders."+suffix, message.NewMessage("o1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	m := receive(t, msgs)
	if m.UUID != "o1" {
		t.Fatalf("received %s, want o1", m.UUID)
	}
	m.Ack()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
		t.Fatalf("the group's queue %q named by AMQPQueueName does not exist: %v", queue, err)
	}
	if _, err := settlewatermill.AMQP(b, settlewatermill.Classic(), settlewatermill.AMQPQueueName(nil)); err == nil {
		t.Fatal("AMQPQueueName(nil) was accepted")
	}
}
