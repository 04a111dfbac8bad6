package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-sqlite"
)

// running is a started Service whose settlements the test waits on.
type running struct {
	*Service
	logs logSignal
	stop func()
}

func start(t *testing.T, path string) *running {
	t.Helper()
	logs := newLogSignal()
	s, err := NewService(context.Background(), path, slog.New(logs), core.WithoutSignals())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.App.Run(ctx) }()
	select {
	case <-s.App.Ready():
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	}
	r := &running{Service: s, logs: logs}
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
		s.DB.Close()
	}
	t.Cleanup(r.stop)
	return r
}

// waitBooked waits, settlement by settlement, until the ledger has want entries for order.
func (r *running) waitBooked(t *testing.T, order string, want int) {
	t.Helper()
	timeout := time.After(coretest.WaitTimeout)
	for {
		ledger, err := Ledger(context.Background(), r.DB.Pool())
		if err != nil {
			t.Fatal(err)
		}
		if ledger[order] >= want {
			return
		}
		select {
		case <-r.Done:
		case <-timeout:
			t.Fatalf("order %s has %d ledger entries after %v, want %d", order, ledger[order], coretest.WaitTimeout, want)
		}
	}
}

// waitSettled waits for the next settlement.
func (r *running) waitSettled(t *testing.T) core.Settlement {
	t.Helper()
	select {
	case s := <-r.Done:
		return s
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("no settlement within %v", coretest.WaitTimeout)
	}
	return core.Settlement{}
}

// unpublished counts the records the relay has not marked published.
func unpublished(t *testing.T, db *sqlite.DB) int {
	t.Helper()
	var n int
	if err := db.Pool().QueryRow(`SELECT COUNT(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitLog waits until the service has logged msg.
func (r *running) waitLog(t *testing.T, msg string) {
	t.Helper()
	r.logs.wait(t, msg)
}

// logSignal keeps log records (coretest.Logs) and wakes whoever waits for a message.
type logSignal struct {
	*coretest.Logs
	sig *signal
}

func newLogSignal() logSignal { return logSignal{Logs: &coretest.Logs{}, sig: &signal{}} }

func (l logSignal) Handle(ctx context.Context, r slog.Record) error {
	err := l.Logs.Handle(ctx, r)
	l.sig.fire()
	return err
}

func (l logSignal) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logSignal{Logs: l.Logs.WithAttrs(attrs).(*coretest.Logs), sig: l.sig}
}

// signal is a broadcast: fire wakes every channel taken with next.
type signal struct {
	mu      sync.Mutex
	changed chan struct{}
}

func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// wait waits until msg has been logged.
func (l logSignal) wait(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(coretest.WaitTimeout)
	for {
		ch := l.sig.next()
		if len(l.Find(msg)) > 0 {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%q not logged within %v", msg, coretest.WaitTimeout)
		}
	}
}

func unprocessed(t *testing.T, r *running) int {
	t.Helper()
	var n int
	if err := r.DB.Pool().QueryRow(`SELECT COUNT(*) FROM outbox WHERE processed_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCommitPublishesAndDuplicatesAreSuppressed(t *testing.T) {
	r := start(t, filepath.Join(t.TempDir(), "o.db"))
	ctx := context.Background()
	tx, err := r.DB.Pool().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders (id, cents) VALUES ('o-1', 500)`); err != nil {
		t.Fatal(err)
	}
	batch, err := r.Box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: "o-1", Cents: 500}, map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := r.Box.Send(ctx, batch); err != nil {
		t.Fatal(err)
	}
	r.waitBooked(t, "o-1", 1)
	if n := unpublished(t, r.DB); n != 0 {
		t.Fatalf("%d records not marked published after a confirmed Send", n)
	}
	// Sent again: the record is published already, so Send leaves it alone.
	if err := r.Box.Send(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// The same record delivered again (as after a crash between its publish and its mark):
	// acknowledged without running the handler.
	if _, err := r.DB.Pool().Exec(`UPDATE outbox SET published_at = NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Box.PublishPending(ctx); err != nil || n != 1 {
		t.Fatalf("PublishPending: %d, %v", n, err)
	}
	const suppressed = "outbox receiver: record already processed; duplicate acknowledged without the handler"
	for len(r.logs.Find(suppressed)) == 0 {
		if s := r.waitSettled(t); s.Verdict.Action != core.ActAck {
			t.Fatalf("settled as %v", s.Verdict)
		}
	}
	ledger, _ := Ledger(ctx, r.DB.Pool())
	if ledger["o-1"] != 1 {
		t.Fatalf("o-1 booked %d times", ledger["o-1"])
	}
	if n := unprocessed(t, r); n != 0 {
		t.Fatalf("%d unprocessed records", n)
	}
}

func TestRollbackRecordsNothing(t *testing.T) {
	r := start(t, filepath.Join(t.TempDir(), "o.db"))
	ctx := context.Background()
	tx, err := r.DB.Pool().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: "o-2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	r.DB.Pool().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d records after a rollback", n)
	}
	if sent, err := r.Box.PublishPending(ctx); err != nil || sent != 0 {
		t.Fatalf("published %d (%v) after a rollback", sent, err)
	}
}

func TestUnpublishedRecordIsRelayedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.db")
	r := start(t, path)
	ctx := context.Background()
	if err := PlaceOrder(ctx, r.DB, r.Box, "down-1", 700); err != nil {
		t.Fatal(err)
	}
	// The first delivery retries ("down" fails once): the record stays unprocessed meanwhile,
	// and the queue delivers it again.
	for s := r.waitSettled(t); s.Verdict.Action != core.ActRetry; s = r.waitSettled(t) {
	}
	r.waitBooked(t, "down-1", 1)
	if n := unprocessed(t, r); n != 0 {
		t.Fatalf("%d unprocessed after the ack", n)
	}
	r.stop()

	// A record never published (its process died before Send) is relayed at the next start,
	// in the background.
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(`INSERT INTO outbox (destination, payload, created_at) VALUES ('payouts', '{"order":"o-late","cents":1}', '2026-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r2 := start(t, path)
	r2.waitBooked(t, "o-late", 1)
	r2.waitLog(t, "outbox: relayed the unpublished records at start")
}

// TestCrashBetweenCommitAndPublish kills a process (SIGKILL) after its transaction committed
// and before it sent the record; the next start publishes it.
func TestCrashBetweenCommitAndPublish(t *testing.T) {
	if path := os.Getenv("OUTBOX_CRASH_DB"); path != "" {
		crashAfterCommit(path)
		return
	}
	path := filepath.Join(t.TempDir(), "o.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashBetweenCommitAndPublish$")
	cmd.Env = append(os.Environ(), "OUTBOX_CRASH_DB="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("crashing process: %v\n%s", err, out)
	}
	r := start(t, path)
	r.waitBooked(t, "o-crash", 1)
	if n := unprocessed(t, r); n != 0 {
		t.Fatalf("%d unprocessed after recovery", n)
	}
}

func crashAfterCommit(path string) {
	ctx := context.Background()
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		panic(err)
	}
	if err := Schema(ctx, db); err != nil {
		panic(err)
	}
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable),
		outbox.PublisherFunc(func(context.Context, string, []byte, map[string]string) error {
			panic("the crashing process never gets to publish")
		}))
	if err != nil {
		panic(err)
	}
	tx, err := db.Pool().BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	tx.Exec(`INSERT INTO orders (id, cents) VALUES ('o-crash', 900)`)
	if _, err := box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: "o-crash", Cents: 900}, nil); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestMissingOrMalformedHeaderIsAPlainDelivery(t *testing.T) {
	r := start(t, filepath.Join(t.TempDir(), "o.db"))
	pub, err := sqlite.NewPublisher(r.DB, sqlqueue.StandardTable(QueueTable), PayoutQueue)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sqlqueue.Publish(ctx, pub, Payout{Order: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlqueue.Publish(ctx, pub, Payout{Order: "bad-header"}, sqlqueue.WithHeaders(map[string]string{outbox.HeaderID: "x7"})); err != nil {
		t.Fatal(err)
	}
	r.waitBooked(t, "plain", 1)
	r.waitBooked(t, "bad-header", 1)
	if len(r.logs.Find("outbox receiver: delivery has no settle-outbox-id header; handled as a plain delivery")) != 1 ||
		len(r.logs.Find("outbox receiver: malformed settle-outbox-id header; handled as a plain delivery")) != 1 {
		t.Fatalf("header problems not logged: %+v", r.logs.Records(slog.LevelWarn))
	}
}

// TestPublishFailureKeepsRecordUnpublished: a refused publish leaves the record unpublished;
// start-up is not held by it, and the background relay publishes it once the transport takes
// it, after a backoff on the outbox's clock.
func TestPublishFailureKeepsRecordUnpublished(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Schema(ctx, db); err != nil {
		t.Fatal(err)
	}
	nack := errors.New("broker nacked the publish")
	var refuse atomic.Bool
	refuse.Store(true)
	sent := make(chan string, 4)
	logs := newLogSignal()
	v := clock.NewVirtual(coretest.Epoch)
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable),
		outbox.PublisherFunc(func(_ context.Context, _ string, _ []byte, h map[string]string) error {
			if refuse.Load() {
				return nack
			}
			sent <- h[outbox.HeaderID]
			return nil
		}), outbox.WithClock(v), outbox.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-nack"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Send(ctx, batch); !errors.Is(err, nack) || !strings.Contains(err.Error(), `to "payouts"`) {
		t.Fatalf("Send: %v", err)
	}
	if n := unpublished(t, db); n != 1 {
		t.Fatalf("%d unpublished records after a nack, want 1", n)
	}
	if err := box.Start(ctx); err != nil {
		t.Fatalf("Start with an unpublishable record: %v", err)
	}
	defer box.Close()
	// The start-up relay fails and waits 1 s on the clock before trying again.
	if err := v.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if len(logs.Find("outbox: relaying unpublished records failed; trying again")) != 1 {
		t.Fatalf("the failed relay was not logged: %+v", logs.Records(slog.LevelWarn))
	}
	refuse.Store(false)
	v.Advance(time.Second)
	select {
	case id := <-sent:
		if id != strconv.FormatInt(batch.IDs()[0], 10) {
			t.Fatalf("relayed record %s", id)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the relay did not try again after its backoff")
	}
	logs.wait(t, "outbox: relayed the unpublished records at start")
	if n := unpublished(t, db); n != 0 {
		t.Fatalf("%d unpublished records after the relay, want 0", n)
	}
}

func TestBadTableIsRefusedAtStart(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pub := outbox.PublisherFunc(func(context.Context, string, []byte, map[string]string) error { return nil })
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable("nowhere"), pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Start(ctx); err == nil || !strings.Contains(err.Error(), "table nowhere: no such table") {
		t.Fatalf("missing table: %v", err)
	}
	db.Pool().Exec(`CREATE TABLE thin (id INTEGER PRIMARY KEY, destination TEXT, payload BLOB)`)
	box, _ = outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable("thin"), pub)
	if err := box.Start(ctx); err == nil || !strings.Contains(err.Error(), "column headers (headers): no such column") {
		t.Fatalf("missing column: %v", err)
	}
	if _, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable("bad name"), pub); err == nil {
		t.Fatal("an invalid table name was accepted")
	}
	if _, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable("x"), nil); err == nil {
		t.Fatal("a nil publisher was accepted")
	}
}

func TestDropMarksTheRecord(t *testing.T) {
	r := start(t, filepath.Join(t.TempDir(), "o.db"))
	if err := PlaceOrder(context.Background(), r.DB, r.Box, "void-1", 100); err != nil {
		t.Fatal(err)
	}
	for s := r.waitSettled(t); s.Verdict.Action != core.ActDrop; s = r.waitSettled(t) {
	}
	if err := r.Box.WaitMarked(context.Background()); err != nil { // the receiver marks off the settlement path
		t.Fatal(err)
	}
	if n := unprocessed(t, r); n != 0 {
		t.Fatalf("%d unprocessed records after a drop, want 0", n)
	}
	if ledger, _ := Ledger(context.Background(), r.DB.Pool()); ledger["void-1"] != 0 {
		t.Fatal("a dropped payout was booked")
	}
}

func TestSweepPublishesWhatSendMissed(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Schema(ctx, db); err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(coretest.Epoch)
	sent := make(chan map[string]string, 4)
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable),
		outbox.PublisherFunc(func(_ context.Context, _ string, _ []byte, h map[string]string) error {
			sent <- h
			return nil
		}), outbox.WithClock(v), outbox.SweepEvery(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	batch, err := box.RecordJSON(ctx, db.Queue(), PayoutQueue, Payout{Order: "o-swept"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v.Advance(time.Minute)
	select {
	case h := <-sent:
		if h[outbox.HeaderID] != strconv.FormatInt(batch.IDs()[0], 10) {
			t.Fatalf("swept publish carries %v", h)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the sweep did not publish the unsent record")
	}
	// Marked published: the next sweep leaves it alone.
	if err := v.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v.Advance(time.Minute)
	box.Close()
	select {
	case h := <-sent:
		t.Fatalf("published again by the next sweep: %v", h)
	default:
	}
}
