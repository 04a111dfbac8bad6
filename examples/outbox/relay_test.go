package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-sqlite"
)

// published is a Publisher that keeps what it was given and signals each publish.
type published struct {
	mu   sync.Mutex
	msgs []sentMessage
	sig  signal
	// hold, when set, is waited on before each publish returns.
	hold chan struct{}
}

type sentMessage struct {
	dest    string
	payload string
	headers map[string]string
}

func (p *published) Publish(ctx context.Context, dest string, payload []byte, h map[string]string) error {
	if p.hold != nil {
		select {
		case <-p.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	p.msgs = append(p.msgs, sentMessage{dest, string(payload), h})
	p.mu.Unlock()
	p.sig.fire()
	return nil
}

func (p *published) sent() []sentMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sentMessage(nil), p.msgs...)
}

// waitCount waits until at least n messages were published.
func (p *published) waitCount(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(coretest.WaitTimeout)
	for {
		ch := p.sig.next()
		if len(p.sent()) >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d messages published within %v, want %d", len(p.sent()), coretest.WaitTimeout, n)
		}
	}
}

// outboxDB opens a SQLite database with the service's schema.
func outboxDB(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Schema(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestSendAfterRollbackIsRefused: on SQLite a rolled-back AUTOINCREMENT id is given to the next
// committed record. Send of the rolled-back batch used to publish its own payload under the
// committed record's id (so the rolled-back payout was booked and the committed one was
// suppressed as a duplicate); it is refused, nothing is sent, and the committed batch is sent
// as it was recorded.
func TestSendAfterRollbackIsRefused(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	pub := &published{}
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), pub)
	if err != nil {
		t.Fatal(err)
	}
	record := func(order string, commit bool) outbox.Batch {
		tx, err := db.Pool().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: order, Cents: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rolledBack := record("o-rolled-back", false)
	kept := record("o-kept", true)
	if rolledBack.IDs()[0] != kept.IDs()[0] {
		t.Fatalf("SQLite gave the committed record id %d, the rolled-back one had %d: the case this test is about did not arise",
			kept.IDs()[0], rolledBack.IDs()[0])
	}
	if err := box.Send(ctx, rolledBack); !errors.Is(err, outbox.ErrNotCommitted) {
		t.Fatalf("Send of a rolled-back batch: %v, want ErrNotCommitted", err)
	}
	if got := pub.sent(); len(got) != 0 {
		t.Fatalf("a rolled-back batch was published: %+v", got)
	}
	if n := unpublished(t, db); n != 1 {
		t.Fatalf("%d unpublished records, want the committed one", n)
	}
	if err := box.Send(ctx, kept); err != nil {
		t.Fatal(err)
	}
	got := pub.sent()
	var p Payout
	if len(got) != 1 || json.Unmarshal([]byte(got[0].payload), &p) != nil || p.Order != "o-kept" ||
		got[0].headers[outbox.HeaderID] != strconv.FormatInt(kept.IDs()[0], 10) {
		t.Fatalf("published %+v, want o-kept under its id", got)
	}
	if _, leaked := got[0].headers[outbox.HeaderBatch]; leaked {
		t.Fatalf("the batch header was relayed: %v", got[0].headers)
	}
	// Send before the commit is refused the same way: the records are not visible yet.
	tx, err := db.Pool().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	early, err := box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: "o-early"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Send(ctx, early); !errors.Is(err, outbox.ErrNotCommitted) {
		t.Fatalf("Send before the commit: %v, want ErrNotCommitted", err)
	}
}

// TestRestartsDoNotRepublishHistory: the relay marks what the transport confirmed, so a
// service whose consumer lives elsewhere (nothing marks records processed here) publishes each
// record once however often it restarts. It used to publish every unprocessed record again at
// every start.
func TestRestartsDoNotRepublishHistory(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	pub := &published{}
	const records = 30
	for restart := range 4 {
		logs := newLogSignal()
		box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), pub, outbox.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		if err := box.Start(ctx); err != nil {
			t.Fatal(err)
		}
		logs.wait(t, "outbox: relayed the unpublished records at start")
		if restart == 0 {
			for i := range records {
				// Every third record's Send is lost (the process died first): the sweep of the
				// next start relays it, once.
				b, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-" + strconv.Itoa(i)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if i%3 != 0 {
					if err := box.Send(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		box.Close()
	}
	got := pub.sent()
	seen := map[string]int{}
	for _, m := range got {
		seen[m.headers[outbox.HeaderID]]++
	}
	if len(got) != records || len(seen) != records {
		t.Fatalf("%d publishes of %d records over 4 starts, want each of %d once", len(got), len(seen), records)
	}
	if n := unpublished(t, db); n != 0 {
		t.Fatalf("%d records left unpublished", n)
	}
}

// TestStartRelaysInBackgroundAtBoundedRate: a backlog of unpublished records does not hold the
// App's readiness, and the relay publishes it at RelayRate on the outbox's clock (10 a second
// here: one at once, then ten per second of virtual time).
func TestStartRelaysInBackgroundAtBoundedRate(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	v := clock.NewVirtual(coretest.Epoch)
	pub := &published{hold: make(chan struct{})}
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), pub,
		outbox.WithClock(v), outbox.RelayRate(10))
	if err != nil {
		t.Fatal(err)
	}
	const backlog = 25
	for i := range backlog {
		if _, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-" + strconv.Itoa(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	app := core.New(core.WithClock(v), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)))
	app.Register(box)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- app.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-app.Ready():
		// Ready while the first publish of the backlog is still waiting on the transport.
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the App is not ready while the outbox relays its backlog")
	}
	close(pub.hold)
	pub.waitCount(t, 1)
	for want := 1; want < backlog; {
		// The relay waits on the clock for the next record's turn.
		if err := v.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n := len(pub.sent()); n != want {
			t.Fatalf("%d published after %v, want %d", n, v.Now().Sub(coretest.Epoch), want)
		}
		v.Advance(time.Second)
		want = min(want+10, backlog)
		pub.waitCount(t, want)
	}
	if err := v.BlockUntil(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(pub.sent()); n != backlog {
		t.Fatalf("%d published, want %d", n, backlog)
	}
}

// TestPruneDeletesOldPublishedRecords: PruneAfter deletes, on the outbox's clock, the records
// published longer ago than its age, and never an unpublished one.
func TestPruneDeletesOldPublishedRecords(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	v := clock.NewVirtual(coretest.Epoch)
	pub := &published{}
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), pub,
		outbox.WithClock(v), outbox.PruneAfter(time.Hour, 10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.Pool().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := box.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	if err := v.BlockUntil(ctx, 1); err != nil { // the prune timer
		t.Fatal(err)
	}
	old, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-old"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Send(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Recorded and never sent: unpublished, it is never pruned.
	if _, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-unsent"}, nil); err != nil {
		t.Fatal(err)
	}
	for range 6 { // 60 minutes: o-old is exactly an hour old, not older
		v.Advance(10 * time.Minute)
		if err := v.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 2 {
		t.Fatalf("%d records after an hour, want 2", n)
	}
	v.Advance(10 * time.Minute)
	if err := v.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d records 70 minutes after the publish, want the unsent one", n)
	}
	if n := unpublished(t, db); n != 1 {
		t.Fatalf("%d unpublished records, want 1", n)
	}
}

// TestReceiveWithoutPublisher: a worker that only receives from the outbox's database mounts
// outbox.Receive, with no publisher and nothing registered, and still suppresses duplicates.
func TestReceiveWithoutPublisher(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	queuePub, err := NewQueuePublisher(db, PayoutQueue)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), queuePub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Receive(db.Dialect(), db.Queue(), outbox.StandardTable("bad name")); err == nil {
		t.Fatal("Receive accepted an invalid table")
	}
	logs := newLogSignal()
	recv, err := outbox.Receive(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), outbox.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan core.Settlement, 8)
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)), core.WithObserver(func(s core.Settlement) { settled <- s }))
	app.Register(db)
	queue, err := sqlite.Lease(db, sqlqueue.StandardTable(QueueTable), PayoutQueue)
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, queue, HandlePayout, sqlqueue.Transactional(), recv, sqlqueue.PollInterval(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- app.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := PlaceOrder(ctx, db, sender, "o-worker", 300); err != nil {
		t.Fatal(err)
	}
	waitAcks := func(n int) {
		for acks := 0; acks < n; {
			select {
			case s := <-settled:
				if s.Verdict.Action != core.ActAck || s.Err != nil {
					t.Fatalf("settled %v (%v)", s.Verdict, s.Err)
				}
				acks++
			case <-time.After(coretest.WaitTimeout):
				t.Fatalf("%d acks, want %d", acks, n)
			}
		}
	}
	waitAcks(1)
	// The record relayed a second time: the worker acknowledges it without the handler.
	if _, err := db.Pool().Exec(`UPDATE outbox SET published_at = NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := sender.PublishPending(ctx); err != nil || n != 1 {
		t.Fatalf("PublishPending: %d, %v", n, err)
	}
	waitAcks(1)
	logs.wait(t, "outbox receiver: record already processed; duplicate acknowledged without the handler")
	ledger, err := Ledger(ctx, db.Pool())
	if err != nil {
		t.Fatal(err)
	}
	if ledger["o-worker"] != 1 {
		t.Fatalf("o-worker booked %d times", ledger["o-worker"])
	}
}

// TestRecordRefusesHeadersItCannotKeep: a header value that is not valid UTF-8 used to be
// stored (and relayed) with U+FFFD in its place; it is refused when recording, as are the
// outbox's own header names.
func TestRecordRefusesHeadersItCannotKeep(t *testing.T) {
	ctx := context.Background()
	db := outboxDB(t)
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), &published{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []map[string]string{
		{"tenant": "\xffacme"}, {"\xfe": "x"}, {outbox.HeaderID: "7"}, {outbox.HeaderBatch: "x"}, {"": "x"},
	} {
		if _, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o"}, h); err == nil {
			t.Errorf("headers %q were recorded", h)
		}
	}
	if n := unpublished(t, db); n != 0 {
		t.Fatalf("%d records written", n)
	}
}

// TestRecordIDMustBeTheRelaysSpelling: a settle-outbox-id header "007" or "+7" is not the
// relay's spelling of record 7: the delivery is a plain one (the handler runs, a warning is
// logged), not a duplicate of processed record 7 acknowledged without the handler.
func TestRecordIDMustBeTheRelaysSpelling(t *testing.T) {
	r := start(t, filepath.Join(t.TempDir(), "o.db"))
	ctx := context.Background()
	if err := PlaceOrder(ctx, r.DB, r.Box, "o-7", 700); err != nil {
		t.Fatal(err)
	}
	r.waitBooked(t, "o-7", 1)
	var id int64
	if err := r.DB.Pool().QueryRow(`SELECT id FROM outbox`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	pub, err := sqlite.NewPublisher(r.DB, sqlqueue.StandardTable(QueueTable), PayoutQueue)
	if err != nil {
		t.Fatal(err)
	}
	for i, spelled := range []string{"00" + strconv.FormatInt(id, 10), "+" + strconv.FormatInt(id, 10)} {
		order := "o-odd-" + strconv.Itoa(i)
		if _, err := sqlqueue.Publish(ctx, pub, Payout{Order: order, Cents: 1}, sqlqueue.WithHeaders(map[string]string{outbox.HeaderID: spelled})); err != nil {
			t.Fatal(err)
		}
		r.waitBooked(t, order, 1)
	}
	if n := len(r.logs.Find("outbox receiver: malformed settle-outbox-id header; handled as a plain delivery")); n != 2 {
		t.Fatalf("%d malformed headers logged, want 2", n)
	}
}
