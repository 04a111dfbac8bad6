package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
)

// events returns a changed hook and the channel it signals on.
func events() (func(), chan struct{}) {
	ch := make(chan struct{}, 16)
	return func() { ch <- struct{}{} }, ch
}

func TestAvailableRetriesOnTheClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vc := clock.NewVirtual(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	f := sqliteFixture(t)
	real, err := parseTarget(f.target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fails := 2
	open := func(ctx context.Context) (ops.Queue, io.Closer, error) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return nil, nil, unreachable(real, errors.New("connection refused"))
		}
		return real.open(ctx)
	}
	changed, ch := events()
	a := &available{name: "jobs/refunds", open: open, clk: vc, log: slog.New(slog.DiscardHandler), changed: changed}
	defer a.Close()
	if err := a.start(ctx); err != nil {
		t.Fatalf("start with the backend down: %v, want the target shown as down", err)
	}
	<-ch
	_, err = a.Stats(ctx)
	var down *downError
	if !errors.As(err, &down) || !errors.Is(err, errDown) || !errors.Is(err, errUnreachable) ||
		!strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "retrying at 12:00:01Z") {
		t.Fatalf("Stats of a down target: %v; want a downError with the reason and the next attempt", err)
	}
	// The console answers a request on the down target with 503 and the reason.
	h, err := console.New([]console.Queue{{Name: "jobs/refunds", Ops: a}}, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/q/0/dead/1", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "connection refused") {
		t.Errorf("a dead letter of a down target: %d, want 503 with the reason\n%s", rec.Code, rec.Body.String())
	}
	// First retry after 1s fails too; the next comes 2s later.
	if err := vc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	vc.Advance(time.Second)
	<-ch
	if _, err := a.Stats(ctx); err == nil || !strings.Contains(err.Error(), "since 12:00:00Z (retrying at 12:00:03Z)") {
		t.Fatalf("after a failed retry: %v", err)
	}
	if err := vc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	vc.Advance(time.Second)
	select {
	case <-ch:
		t.Fatal("retried before its backoff of 2s")
	default:
	}
	vc.Advance(time.Second)
	<-ch
	f.addDead(t, []byte(`{}`), deadHeaders("refunds", "boom", 3))
	s, err := a.Stats(ctx)
	if err != nil || s.Dead != 1 {
		t.Fatalf("after the backend answered: %+v, %v; want 1 dead letter", s, err)
	}
}

func TestAvailableRefusesAMistake(t *testing.T) {
	tg, err := parseTarget("sqlite:///x.db") // no table: a usage error, not an outage
	if err != nil {
		t.Fatal(err)
	}
	a := &available{name: "x", open: tg.open, clk: clock.NewVirtual(time.Now()), log: slog.New(slog.DiscardHandler)}
	if err := a.start(context.Background()); err == nil || !isUsage(err) {
		t.Fatalf("a target without its table: %v, want a usage error at start", err)
	}
}

// freePort returns a loopback port nothing listens on (for now).
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return fmt.Sprint(port)
}

// TestAvailableRabbitMQRecovers starts a RabbitMQ target behind a proxy that refuses every
// connection, then restores the proxy: the target comes up at its next attempt.
func TestAvailableRabbitMQRecovers(t *testing.T) {
	f := rabbitFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	p := coretest.NewProxy(t, u.Host)
	p.Refuse()
	down := strings.Replace(f.target, u.Host, p.Addr(), 1)
	tg, err := parseTarget(down)
	if err != nil {
		t.Fatal(err)
	}
	vc := clock.NewVirtual(time.Now())
	changed, ch := events()
	a := &available{name: tg.name(), open: tg.open, clk: vc, log: slog.New(slog.DiscardHandler), changed: changed}
	defer a.Close()
	if err := a.start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ch
	if _, err := a.Stats(ctx); !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "is down") {
		t.Fatalf("Stats with RabbitMQ unreachable: %v", err)
	}
	p.Restore()
	f.addDead(t, []byte(`{"n":1}`), deadHeaders(f.origin, "boom", 3))
	if err := vc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	vc.Advance(reopenFirst)
	<-ch
	s, err := a.Stats(ctx)
	if err != nil || s.Dead != 1 {
		t.Fatalf("after RabbitMQ answered: %+v, %v; want 1 dead letter", s, err)
	}
}

// startConsole runs settle console with args in process and returns its URL and stderr; the
// test's cleanup stops it and checks it exited 0.
func startConsole(t *testing.T, args ...string) (string, *syncWriter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &syncWriter{w: &strings.Builder{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"console"}, args...), pw, stderr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("console exit code %d\n%s", code, stderr)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("the console did not start: %v\n%s", err, stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(line[strings.Index(line, "http://"):]), stderr
}

// TestConsoleStartsWithATargetDown serves the console over a healthy SQLite target and a
// RabbitMQ one where nothing answers: it starts, shows the first, and the second as down with
// its reason.
func TestConsoleStartsWithATargetDown(t *testing.T) {
	f := sqliteFixture(t)
	f.addDead(t, []byte(`{}`), deadHeaders("refunds", "boom", 3))
	u, _ := startConsole(t, "--listen", "127.0.0.1:0", "--target", f.target,
		"--target", "amqp://guest:guest@127.0.0.1:"+freePort(t)+"/?queue=payouts&dead=payouts.dead")
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	if resp.StatusCode != 200 || !strings.Contains(page, `data-figure="dead"><a href="/q/0">1</a>`) ||
		!strings.Contains(page, "target payouts is down since") || !strings.Contains(page, "connection refused") {
		t.Fatalf("overview with one target down: %d\n%s", resp.StatusCode, page)
	}
}

// TestConsoleOnEveryInterfaceSaysWhichHosts serves on 0.0.0.0 (with a token): it warns that
// only loopback names are answered until --allowed-hosts names more, and refuses another Host.
func TestConsoleOnEveryInterfaceSaysWhichHosts(t *testing.T) {
	f := sqliteFixture(t)
	u, stderr := startConsole(t, "--listen", "0.0.0.0:0", "--token", "s3cret-token", "--target", f.target)
	if !strings.Contains(stderr.String(), "--allowed-hosts") {
		t.Errorf("no warning about --allowed-hosts:\n%s", stderr)
	}
	req, _ := http.NewRequest("GET", strings.Replace(u, "0.0.0.0", "127.0.0.1", 1), nil)
	req.Host = "ops.example.com"
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host ops.example.com without --allowed-hosts: %d, want 421", resp.StatusCode)
	}
	u2, _ := startConsole(t, "--listen", "0.0.0.0:0", "--token", "s3cret-token", "--allowed-hosts", "ops.example.com", "--target", f.target)
	req, _ = http.NewRequest("GET", strings.Replace(u2, "0.0.0.0", "127.0.0.1", 1), nil)
	req.Host = "ops.example.com"
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("Host ops.example.com with --allowed-hosts: %d, want 200", resp.StatusCode)
	}
}

// syncWriter serialises writes from the console's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(fmt.Stringer).String()
}
