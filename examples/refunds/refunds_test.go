package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

var epoch = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func TestProcessByCard(t *testing.T) {
	for card, want := range map[string]error{
		"4242": nil, "busy-1": ErrBusy, "down-9": ErrUnavailable, "closed-3": ErrDeclined,
	} {
		if got := Process(context.Background(), Refund{Card: card}); !errors.Is(got, want) {
			t.Errorf("Process(%q) = %v; want %v", card, got, want)
		}
	}
}

// driveClock advances the virtual clock by step whenever every subscription is idle (its poll
// and lease-extension timers armed), until done is closed.
func driveClock(t *testing.T, c *clock.Virtual, idleTimers int, step time.Duration, done <-chan struct{}) {
	t.Helper()
	deadline := time.After(coretest.WaitTimeout)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-done:
			case <-deadline:
			}
			cancel()
		}()
		err := c.BlockUntil(ctx, idleTimers)
		cancel()
		select {
		case <-done:
			return
		default:
		}
		if err != nil {
			t.Fatalf("the service did not finish within %v", coretest.WaitTimeout)
		}
		c.Advance(step)
	}
}

// TestDemo runs the demo against a SQLite file on a virtual clock: every refund ends where
// its card says, dead letters are logged with their attempts, and the table shows it.
func TestDemo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refunds.db")
	vc := clock.NewVirtual(epoch)
	logs := &coretest.Logs{}
	var out bytes.Buffer
	cfg := Config{DB: path, Backoff: 100 * time.Millisecond, Poll: 200 * time.Millisecond}
	ran := make(chan error, 1)
	stopDriving := make(chan struct{})
	rec := coretest.NewRecorder(t)
	go func() {
		ran <- Run(context.Background(), cfg, &out, slog.New(logs), core.WithClock(vc), core.WithObserver(rec.Observe))
		close(stopDriving)
	}()
	// two lease subscriptions, each with a poll and an extension timer when idle
	driveClock(t, vc, 4, cfg.Poll, stopDriving)
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	summary := out.String()
	for ref, want := range map[string]string{
		"r-ok-1": "1  refunded", "r-ok-2": "1  refunded",
		"r-closed-1": "1  declined, dropped", "r-closed-2": "1  declined, dropped",
		"r-busy-1": "5  dead letter (refunds.dead)", "r-busy-2": "5  dead letter (refunds.dead)",
		"r-down-1": "5  dead letter (refunds.dead)", "r-down-2": "5  dead letter (refunds.dead)",
	} {
		line := ""
		for _, l := range strings.Split(summary, "\n") {
			if strings.HasPrefix(l, ref+" ") {
				line = l
			}
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("summary line for %s = %q; want it to end %q\n%s", ref, line, want, summary)
		}
	}
	dead := logs.Find("dead letter: refund gave up")
	if len(dead) != 4 {
		t.Errorf("%d dead letters logged; want 4", len(dead))
	}
	for _, r := range dead {
		if r.Attrs["attempts"] != int64(MaxAttempts) {
			t.Errorf("dead letter %v logged attempts %v; want %d", r.Attrs["ref"], r.Attrs["attempts"], MaxAttempts)
		}
	}
	if n := len(logs.Find("refund declined; dropping it")); n != 2 {
		t.Errorf("%d declined warnings; want 2", n)
	}
	// A busy processor's error took the Policy, core.Backoff: a RetryAfter at each of the four
	// attempts before the cap, its delay drawn from [0, base·2ⁿ⁻¹] (full jitter), kept in the
	// row's retry_after.
	busy := 0
	for _, s := range rec.Settlements() {
		var r Refund
		if err := json.Unmarshal(s.Delivery.Body(), &r); err != nil || !strings.HasPrefix(r.Card, "busy") || s.Queue != Queue {
			continue
		}
		n := s.Delivery.Attempt()
		if n == MaxAttempts {
			continue // the cap: dead letter
		}
		busy++
		limit := min(cfg.Backoff<<(n-1), MaxBackoff(cfg.Backoff))
		if v := s.Verdict; v.Action != core.ActRetryAfter || v.Delay < 0 || v.Delay > limit || !errors.Is(v.Cause, ErrBusy) {
			t.Errorf("%s attempt %d: %v (cause %v); want retry_after within [0, %v] because busy", r.Ref, n, v, v.Cause, limit)
		}
	}
	if busy != 2*(MaxAttempts-1) {
		t.Errorf("%d backoffs of busy refunds; want %d", busy, 2*(MaxAttempts-1))
	}

	db, err := openSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var inMain, inDead, pending int
	q := `SELECT
		COUNT(*) FILTER (WHERE grp = 'refunds' AND processed_at IS NOT NULL),
		COUNT(*) FILTER (WHERE grp = 'refunds.dead' AND processed_at IS NOT NULL AND attempt = 6),
		COUNT(*) FILTER (WHERE processed_at IS NULL)
		FROM refunds`
	if err := db.Pool().QueryRow(q).Scan(&inMain, &inDead, &pending); err != nil {
		t.Fatal(err)
	}
	if inMain != 4 || inDead != 4 || pending != 0 {
		t.Errorf("table: %d processed in refunds, %d processed in refunds.dead, %d pending; want 4, 4, 0", inMain, inDead, pending)
	}
}

// TestServeTakesInsertedRows inserts a refund the way the README shows (plain SQL, as the
// sqlite3 shell would) while the service runs in serve mode.
func TestServeTakesInsertedRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refunds.db")
	vc := clock.NewVirtual(epoch)
	rec := coretest.NewRecorder(t)
	logs := &coretest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{DB: path, Backoff: time.Second, Poll: time.Second, Serve: true}
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, cfg, &bytes.Buffer{}, slog.New(logs), core.WithClock(vc), core.WithObserver(rec.Observe))
	}()
	if err := vc.BlockUntil(ctx, 4); err != nil { // both subscriptions idle: the table exists
		t.Fatal(err)
	}
	db, err := openSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool().Exec(`INSERT INTO refunds (grp, payload) VALUES ('refunds', '{"ref":"r-shell","card":"4242","cents":100}')`); err != nil {
		t.Fatal(err)
	}
	vc.Advance(cfg.Poll)
	s := rec.WaitSettled(1)
	if s[0].Verdict.Action != core.ActAck || s[0].Err != nil || s[0].Delivery.Attempt() != 1 {
		t.Errorf("settlement = %v attempt %d err %v; want ack on attempt 1", s[0].Verdict, s[0].Delivery.Attempt(), s[0].Err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(logs.Find("refunded")); n != 1 {
		t.Errorf("%d refunded logs; want 1", n)
	}
}

func TestBadFlags(t *testing.T) {
	err := Run(context.Background(), Config{DB: filepath.Join(t.TempDir(), "x.db"), Backoff: -time.Second, Poll: time.Second}, &bytes.Buffer{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-backoff") {
		t.Errorf("negative backoff: err = %v", err)
	}
}

// TestDemoKeepingDead runs the demo with -keep-dead: the four refunds that give up stay in the
// refunds.dead group, unread, and the summary names the settle command that lists them.
func TestDemoKeepingDead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refunds.db")
	vc := clock.NewVirtual(epoch)
	logs := &coretest.Logs{}
	var out bytes.Buffer
	cfg := Config{DB: path, Backoff: 100 * time.Millisecond, Poll: 200 * time.Millisecond, KeepDead: true}
	ran := make(chan error, 1)
	stopDriving := make(chan struct{})
	go func() {
		ran <- Run(context.Background(), cfg, &out, slog.New(logs), core.WithClock(vc))
		close(stopDriving)
	}()
	driveClock(t, vc, 2, cfg.Poll, stopDriving) // one lease subscription: a poll and an extension timer
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(logs.Find("dead letter: refund gave up")); n != 0 {
		t.Errorf("%d dead letters were read; -keep-dead reads none", n)
	}
	if !strings.Contains(out.String(), "settle dead ls --dsn sqlite://"+path+" --table refunds --queue refunds --dead refunds.dead") {
		t.Errorf("the summary does not name the settle command:\n%s", out.String())
	}
	db, err := openSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Pool().QueryRow(`SELECT COUNT(*) FROM refunds WHERE grp = 'refunds.dead' AND processed_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d unprocessed rows in refunds.dead, want the 4 that gave up", n)
	}
}
