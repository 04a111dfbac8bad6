package settlewatermill_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

type foreignKey struct{}

// sqliteSetup is one SQLite file with the suite's table, its queue Topics and a Publisher.
type sqliteSetup struct {
	db     *sqlite.DB
	topics *settlewatermill.SQLTopics
	pub    *settlewatermill.Publisher
}

func newSQLite(t *testing.T, opts ...settlewatermill.SQLOption) *sqliteSetup {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "adapter.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	topics, err := settlewatermill.SQL(db, queueTable("wm"), sqlite.Lease, sqlite.NewPublisher,
		append([]settlewatermill.SQLOption{settlewatermill.CreateTables()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := settlewatermill.NewPublisher(topics)
	if err != nil {
		t.Fatal(err)
	}
	return &sqliteSetup{db: db, topics: topics, pub: pub}
}

// subscribe returns a Subscriber of s's Topics and the channel of its subscription to topic;
// the Subscriber closes when t ends.
func (s *sqliteSetup) subscribe(t *testing.T, topic string, opts ...settlewatermill.SubscriberOption) (*settlewatermill.Subscriber, <-chan *message.Message) {
	t.Helper()
	sub, err := settlewatermill.NewSubscriber(s.topics, append([]settlewatermill.SubscriberOption{settlewatermill.WithLogger(suiteLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	msgs, err := sub.Subscribe(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return sub, msgs
}

// row is a queue row as SQLite holds it.
type row struct {
	grp         string
	attempt     int
	retryAfter  sql.NullString
	lockedUntil sql.NullString
	headers     map[string]string
}

// rows reads every row of the table, in id order.
func (s *sqliteSetup) rows(t *testing.T) []row {
	t.Helper()
	rs, err := s.db.Pool().Query(`SELECT grp, attempt, retry_after, locked_until, COALESCE(headers, '{}') FROM wm ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		var h string
		if err := rs.Scan(&r.grp, &r.attempt, &r.retryAfter, &r.lockedUntil, &h); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(h), &r.headers); err != nil {
			t.Fatalf("headers %q: %v", h, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func receive(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the subscription's channel closed")
		}
		return m
	case <-time.After(15 * time.Second):
		t.Fatal("no message within 15s")
	}
	return nil
}

// TestMessageMapping: the UUID, metadata and payload survive the queue; the attempt and the
// row's id are added to the metadata; the UUID is stored in the row's headers.
func TestMessageMapping(t *testing.T) {
	s := newSQLite(t)
	in := message.NewMessage("4a1d3d4e-uuid", []byte(`{"order":7}`))
	in.Metadata.Set("trace", "abc")
	if err := s.pub.Publish("orders", in); err != nil {
		t.Fatal(err)
	}
	rows := s.rows(t)
	if len(rows) != 1 || rows[0].grp != "orders" || rows[0].headers[settlewatermill.HeaderUUID] != in.UUID || rows[0].headers["trace"] != "abc" {
		t.Fatalf("stored rows %+v, want one in group orders with the UUID and metadata in its headers", rows)
	}
	_, msgs := s.subscribe(t, "orders")
	m := receive(t, msgs)
	if m.UUID != in.UUID || string(m.Payload) != string(in.Payload) || m.Metadata.Get("trace") != "abc" {
		t.Fatalf("received %s %q %v, want %s %q with trace=abc", m.UUID, m.Payload, m.Metadata, in.UUID, in.Payload)
	}
	if m.Metadata.Get(settlewatermill.MetadataAttempt) != "1" || m.Metadata.Get(settlewatermill.MetadataMessageID) != "1" {
		t.Fatalf("metadata %v, want attempt 1 and message id 1", m.Metadata)
	}
	if _, ok := m.Metadata[settlewatermill.HeaderUUID]; ok {
		t.Fatalf("metadata %v carries the UUID header; the UUID is the message's own", m.Metadata)
	}
	m.Ack()
}

// TestNackRetriesAndCounts: Nack returns the message for another attempt, counted.
func TestNackRetriesAndCounts(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	_, msgs := s.subscribe(t, "jobs")
	receive(t, msgs).Nack()
	m := receive(t, msgs)
	if m.UUID != "u1" || m.Metadata.Get(settlewatermill.MetadataAttempt) != "2" {
		t.Fatalf("after a nack: %s attempt %s, want u1 attempt 2", m.UUID, m.Metadata.Get(settlewatermill.MetadataAttempt))
	}
	m.Ack()
}

// TestRedeliveryDelay: with RedeliveryDelay(d), Nack holds the row back until now + d, in
// the database.
func TestRedeliveryDelay(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, msgs := s.subscribe(t, "jobs", settlewatermill.RedeliveryDelay(time.Hour))
	before := time.Now().UTC()
	receive(t, msgs).Nack()
	if err := sub.Close(); err != nil { // waits for the settlement
		t.Fatal(err)
	}
	after := time.Now().UTC()
	rows := s.rows(t)
	if len(rows) != 1 || !rows[0].retryAfter.Valid || rows[0].lockedUntil.Valid {
		t.Fatalf("rows %+v, want one, unlocked, with a retry_after", rows)
	}
	at, err := sqlite.ParseTime(rows[0].retryAfter.String)
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before.Add(time.Hour).Truncate(time.Millisecond)) || at.After(after.Add(time.Hour)) {
		t.Fatalf("retry_after %v, want between %v and %v", at, before.Add(time.Hour), after.Add(time.Hour))
	}
}

// TestCapDeadLetters: settle's cap (Mount(core.DeadLetterAfter)) moves a message nacked at the
// cap to its dead letter, which says why.
func TestCapDeadLetters(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, msgs := s.subscribe(t, "jobs", settlewatermill.Mount(core.DeadLetterAfter(2, "jobs.dead")))
	receive(t, msgs).Nack()
	receive(t, msgs).Nack()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	rows := s.rows(t)
	if len(rows) != 1 || rows[0].grp != "jobs.dead" || rows[0].headers[core.HeaderRetryCount] != "2" || rows[0].headers[core.HeaderOrigin] != "jobs" {
		t.Fatalf("rows %+v, want one in jobs.dead with count 2 and origin jobs", rows)
	}
	// The dead letter is a topic like any other.
	_, dead := s.subscribe(t, "jobs.dead")
	m := receive(t, dead)
	if m.UUID != "u1" || m.Metadata.Get(core.HeaderOrigin) != "jobs" {
		t.Fatalf("dead letter %s %v, want u1 from jobs", m.UUID, m.Metadata)
	}
	m.Ack()
}

// TestCloseAbandons: a message still in hand when the Subscriber closes is given back as it
// was, not charged as a failure: even under a cap of 1, where a retry would dead-letter it, it
// stays in its queue, unlocked.
func TestCloseAbandons(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, msgs := s.subscribe(t, "jobs", settlewatermill.Mount(core.DeadLetterAfter(1, "jobs.dead")))
	m := receive(t, msgs)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Context().Done():
	default:
		t.Fatal("the message's context is still live after Close")
	}
	if _, open := <-msgs; open {
		t.Fatal("a message was handed out after Close")
	}
	rows := s.rows(t)
	if len(rows) != 1 || rows[0].grp != "jobs" || rows[0].lockedUntil.Valid || rows[0].attempt != 1 {
		t.Fatalf("rows %+v, want the message back in jobs, unlocked, at attempt 1", rows)
	}
	if m.Ack() {
		// Ack after Close is Watermill's to accept; it must not resurrect the subscription.
		if _, open := <-msgs; open {
			t.Fatal("a message was handed out after Close")
		}
	}
}

// TestSubscribeContextEnds: cancelling Subscribe's context closes the channel and gives the
// message in hand back.
func TestSubscribeContextEnds(t *testing.T) {
	s := newSQLite(t)
	if err := s.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	sub, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.WithLogger(suiteLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	msgs, err := sub.Subscribe(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	receive(t, msgs)
	cancel()
	for range msgs { // closes once the subscription has stopped
	}
	if rows := s.rows(t); len(rows) != 1 || rows[0].lockedUntil.Valid || rows[0].attempt != 1 {
		t.Fatalf("rows %+v, want the message back, unlocked, at attempt 1", rows)
	}
	if _, err := sub.Subscribe(context.Background(), "jobs"); err != nil {
		t.Fatalf("the Subscriber subscribes again after a subscription's context ended: %v", err)
	}
}

// TestRefusals: what does not fit is refused with an error that names it.
func TestRefusals(t *testing.T) {
	s := newSQLite(t)
	sub, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.ConsumerGroup("billing"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(t.Context(), "jobs"); err == nil || !strings.Contains(err.Error(), "FanOut") {
		t.Fatalf("a consumer group on Topics without FanOut: %v, want an error naming FanOut", err)
	}
	fan := newSQLite(t, settlewatermill.FanOut())
	if err := fan.pub.Publish("jobs", message.NewMessage("u1", []byte("x"))); !errors.Is(err, settlewatermill.ErrNoQueue) {
		t.Fatalf("a publish to a fan-out topic with no group: %v, want ErrNoQueue", err)
	}
	plain, err := settlewatermill.NewSubscriber(fan.topics)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Subscribe(t.Context(), "jobs"); err == nil || !strings.Contains(err.Error(), "ConsumerGroup") {
		t.Fatalf("no consumer group on fan-out Topics: %v, want an error naming ConsumerGroup", err)
	}
	if _, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.Mount(core.WithCodec(core.JSON))); err == nil || !strings.Contains(err.Error(), "WithCodec") {
		t.Fatalf("Mount(core.WithCodec(...)): %v, want an error naming WithCodec", err)
	}
	if _, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.Mount(core.DeadLetterAfter(0, "x"))); err == nil || !strings.Contains(err.Error(), "DeadLetterAfter") {
		t.Fatalf("Mount(core.DeadLetterAfter(0, ...)): %v, want an error naming DeadLetterAfter", err)
	}
	// An option of a backend the queue is not on (here one no endpoint reads) fails Subscribe.
	foreign := core.OptionFunc(func(o *core.Options) error { o.SetExt(foreignKey{}, "other.Option()", true); return nil })
	wrong, err := settlewatermill.NewSubscriber(s.topics, settlewatermill.Mount(foreign))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Subscribe(t.Context(), "jobs"); err == nil || !strings.Contains(err.Error(), "other.Option()") {
		t.Fatalf("another backend's option on a SQL queue: %v, want Subscribe to fail naming it", err)
	}
	closed, err := settlewatermill.NewSubscriber(s.topics)
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	if _, err := closed.Subscribe(t.Context(), "jobs"); !errors.Is(err, settlewatermill.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
	_ = s.pub.Close()
	if err := s.pub.Publish("jobs", message.NewMessage("u2", nil)); !errors.Is(err, settlewatermill.ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}
}

// TestFanOutGroups: each consumer group gets every message published after it registered;
// subscribers of one group share its messages.
func TestFanOutGroups(t *testing.T) {
	s := newSQLite(t, settlewatermill.FanOut())
	_, billing := s.subscribe(t, "orders", settlewatermill.ConsumerGroup("billing"))
	_, shipping := s.subscribe(t, "orders", settlewatermill.ConsumerGroup("shipping"))
	if err := s.pub.Publish("orders", message.NewMessage("o1", []byte("x")), message.NewMessage("o2", []byte("y"))); err != nil {
		t.Fatal(err)
	}
	for name, msgs := range map[string]<-chan *message.Message{"billing": billing, "shipping": shipping} {
		for _, want := range []string{"o1", "o2"} {
			m := receive(t, msgs)
			if m.UUID != want {
				t.Fatalf("group %s received %s, want %s", name, m.UUID, want)
			}
			m.Ack()
		}
	}
}
