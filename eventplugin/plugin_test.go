package eventplugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

func ackRequest(id int64) *Request {
	return &Request{
		Event: EventAck, Dialect: "sqlite", Form: sqlqueue.FormLease, Placeholders: PlaceholdersQuestion,
		Table: Table{Table: sqlqueue.StandardTable("jobs"), QuotedName: `"jobs"`, Quoted: sqlqueue.Columns{ID: `"id"`, Payload: `"payload"`, LockedUntil: `"locked_until"`}},
		Now:   time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Row:   Row{ID: id, Attempt: 1},
	}
}

func TestLoadRendersDeclaredEvents(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "test-helper" {
		t.Errorf("Name() = %q, want the manifest's name", p.Name())
	}
	if !p.Declares(EventRetryAfter, "sqlite") || p.Declares(EventRetryAfter, "postgres") || p.Declares(EventClaim, "sqlite") {
		t.Errorf("Declares does not follow the manifest")
	}
	stmts, err := p.Render(context.Background(), ackRequest(7))
	if err != nil {
		t.Fatal(err)
	}
	want := Statement{SQL: `DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?`, Args: []any{int64(7), time.Time{}}}
	if len(stmts) != 1 || stmts[0].SQL != want.SQL || len(stmts[0].Args) != 2 || stmts[0].Args[0] != want.Args[0] {
		t.Fatalf("Render = %#v, want %#v", stmts, want)
	}
}

// Each bad answer is an *Error naming the plugin and the event, matching its sentinel.
func TestRenderRefusesBadAnswers(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "rogue")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		req   *Request
		is    error
		words string
	}{
		{"handler error", ackRequest(idError), ErrHandler, "row 13 is cursed"},
		{"wrong argument count", ackRequest(idArgCount), ErrArgCount, "statement 1 has 1 placeholders but 2 arguments"},
		{"answer for another event", ackRequest(idWrongEv), ErrUndeclared, "asked for ack, the plugin answered with statements for dead_letter"},
		{"event not declared", func() *Request { r := ackRequest(1); r.Event = EventClaim; return r }(), ErrUndeclared, `does not handle claim for dialect "sqlite"`},
		{"event not declared for the dialect", func() *Request {
			r := ackRequest(1)
			r.Event, r.Dialect, r.Placeholders = EventRetryAfter, "postgres", PlaceholdersDollar
			return r
		}(), ErrUndeclared, `does not handle retry_after for dialect "postgres"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Render(context.Background(), c.req)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, c.is) {
				t.Fatalf("err = %v, want an *Error matching %v", err, c.is)
			}
			if e.Plugin != "test-helper" || e.Event != c.req.Event {
				t.Errorf("error names plugin %q and event %v, want test-helper and %v", e.Plugin, e.Event, c.req.Event)
			}
			if msg := err.Error(); !strings.Contains(msg, c.words) || !strings.Contains(msg, `plugin "test-helper", event `+c.req.Event.String()) {
				t.Errorf("error %q does not say %q with plugin and event", msg, c.words)
			}
		})
	}
	// None of that took the plugin down.
	if _, err := p.Render(context.Background(), ackRequest(1)); err != nil {
		t.Fatalf("after refused answers: %v", err)
	}
}

// waitUp waits until the plugin runs again after a restart.
func waitUp(t *testing.T, p *Plugin) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		up, changed := p.state()
		if up {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the plugin did not come back")
		}
	}
}

// A crash fails the event, takes the plugin down until the backoff has passed on the clock,
// and the restarted plugin renders again.
func TestCrashRestartsWithBackoff(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &coretest.Logs{}
	p, err := loadHelper(t, "ok", WithClock(vc), RestartBackoff(time.Second, 8*time.Second), WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Render(context.Background(), ackRequest(idCrash))
	if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), `plugin "test-helper", event ack`) {
		t.Fatalf("crash: err = %v, want ErrCrashed naming plugin and event", err)
	}
	// Down until the backoff passes: calls fail at once.
	if _, err := p.Render(context.Background(), ackRequest(1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("while down: err = %v, want ErrUnavailable", err)
	}
	failed := logs.Find("eventplugin: plugin failed during an event; restarting it")
	if len(failed) != 1 || failed[0].Attrs["plugin"] != "test-helper" || failed[0].Attrs["event"] != "ack" {
		t.Fatalf("log of the crash = %+v, want one naming plugin and event", failed)
	}
	if err := vc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	vc.Advance(999 * time.Millisecond)
	if up, _ := p.state(); up {
		t.Fatal("restarted before the backoff passed")
	}
	vc.Advance(time.Millisecond)
	waitUp(t, p)
	if _, err := p.Render(context.Background(), ackRequest(1)); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if len(logs.Find("eventplugin: plugin restarted")) != 1 {
		t.Error("no log of the restart")
	}
}

// Failures without a successful call in between double the backoff.
func TestBackoffDoublesUntilACallSucceeds(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := loadHelper(t, "ok", WithClock(vc), RestartBackoff(time.Second, 3*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		if _, err := p.Render(context.Background(), ackRequest(idCrash)); !errors.Is(err, ErrCrashed) {
			t.Fatalf("crash %d: %v", i, err)
		}
		if err := vc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if due, _ := vc.NextDue(); due.Sub(vc.Now()) != wait {
			t.Fatalf("crash %d: restart in %v, want %v", i, due.Sub(vc.Now()), wait)
		}
		vc.Advance(wait)
		waitUp(t, p)
	}
	if _, err := p.Render(context.Background(), ackRequest(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(context.Background(), ackRequest(idCrash)); !errors.Is(err, ErrCrashed) {
		t.Fatal(err)
	}
	if err := vc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if due, _ := vc.NextDue(); due.Sub(vc.Now()) != time.Second {
		t.Fatalf("after a successful call the backoff is %v, want it back at 1s", due.Sub(vc.Now()))
	}
}

// A call past the timeout fails with ErrTimeout and the hung plugin is replaced.
func TestHangTimesOutAndRestarts(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := loadHelper(t, "ok", WithClock(vc), CallTimeout(time.Second), RestartBackoff(time.Second, time.Second), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Render(context.Background(), ackRequest(idHang))
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `plugin "test-helper", event ack`) {
		t.Fatalf("hang: err = %v, want ErrTimeout naming plugin and event", err)
	}
	if err := vc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	vc.Advance(time.Second)
	waitUp(t, p)
	if _, err := p.Render(context.Background(), ackRequest(1)); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// A caller that gives up does not take the plugin down.
func TestCallerCancellationKeepsThePlugin(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "ok", CallTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Render(ctx, ackRequest(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if up, _ := p.state(); !up {
		t.Fatal("the plugin went down")
	}
}

// Binaries that cannot serve as event plugins are refused at Load with a StartError that
// names the plugin and says why.
func TestLoadRefusesBadBinaries(t *testing.T) {
	t.Parallel()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(self)
	wrong := sha256.Sum256([]byte("another binary"))
	cases := []struct {
		name  string
		mode  string
		opts  []Option
		is    error
		words string
	}{
		{"not a plugin", "not-a-plugin", nil, ErrNotPlugin, "hello, I am a command-line tool"},
		{"silent binary", "silent", []Option{StartTimeout(500 * time.Millisecond)}, ErrNotPlugin, "timeout while waiting for plugin to start"},
		{"wrong magic cookie", "wrong-cookie", nil, ErrMagicCookie, "This binary is a plugin"},
		{"protocol version mismatch", "version-2", nil, ErrProtocol, "Plugin version: 2"},
		{"checksum mismatch", "ok", []Option{SHA256(wrong[:])}, ErrChecksum, "checksums did not match"},
		{"malformed manifest", "bad-manifest", nil, ErrManifest, "unknown event event(42)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadHelper(t, c.mode, append(c.opts, WithLogger(slog.New(slog.DiscardHandler)))...)
			var se *StartError
			if !errors.As(err, &se) || !errors.Is(err, c.is) {
				t.Fatalf("err = %v, want a StartError matching %v", err, c.is)
			}
			if se.Path != os.Args[0] || !strings.Contains(err.Error(), c.words) || !strings.Contains(err.Error(), "cannot start") {
				t.Errorf("error %q does not name the binary and say %q", err, c.words)
			}
		})
	}
	t.Run("right checksum", func(t *testing.T) {
		t.Parallel()
		if _, err := loadHelper(t, "ok", SHA256(sum[:]), WithLogger(slog.New(slog.DiscardHandler))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing binary", func(t *testing.T) {
		t.Parallel()
		_, err := Load(context.Background(), t.TempDir()+"/nope", WithLogger(slog.New(slog.DiscardHandler)))
		var se *StartError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("err = %v, want a StartError naming the path", err)
		}
	})
}

func TestCheckRefusesUndeclaredEvents(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background(), "sqlite", EventAck, EventRetryAfter); err != nil {
		t.Fatal(err)
	}
	err = p.Check(context.Background(), "postgres", EventAck, EventRetryAfter)
	if !errors.Is(err, ErrUndeclared) || !strings.Contains(err.Error(), `plugin "test-helper", event retry_after`) {
		t.Fatalf("err = %v, want ErrUndeclared naming plugin and event", err)
	}
}

// Check starts a plugin that is down at once: a subscription starting meanwhile need not wait
// for the backoff, and one whose plugin cannot start refuses to start.
func TestCheckStartsADownPlugin(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := loadHelper(t, "ok", WithClock(vc), RestartBackoff(time.Hour, time.Hour), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(context.Background(), ackRequest(idCrash)); !errors.Is(err, ErrCrashed) {
		t.Fatal(err)
	}
	if err := p.Check(context.Background(), "sqlite", EventAck); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(context.Background(), ackRequest(1)); err != nil {
		t.Fatal(err)
	}
	if vc.Pending() != 0 {
		t.Errorf("the restart timer is still armed after Check started the plugin")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	p, err := loadHelper(t, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(context.Background(), ackRequest(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := p.Check(context.Background(), "sqlite", EventAck); !errors.Is(err, ErrClosed) {
		t.Fatalf("Check after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, o := range []Option{CallTimeout(0), StartTimeout(-1), RestartBackoff(2, 1), WithLogger(nil), WithClock(nil), Logger(nil), Clock(nil), SHA256([]byte{1}), SecureConfig(nil), Env("NOEQUALS")} {
		if _, err := Load(context.Background(), os.Args[0], o); err == nil || !strings.Contains(err.Error(), "eventplugin.") {
			t.Errorf("option accepted or error does not name it: %v", err)
		}
	}
}
