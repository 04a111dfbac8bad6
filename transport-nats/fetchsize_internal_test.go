package natsjs

import (
	"log/slog"
	"testing"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// TestAdaptRule walks the automatic fetch size through its rule on a virtual clock: a full
// fetch got through in under batching.Cycle grows the next towards its worth (at least
// double, at most batching.MaxGrowth times, never past the ceiling); a slow one, or one that came
// back less than half full, halves it, never below the worker count.
func TestAdaptRule(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &consumer{base: 2, batch: 300, clock: vc, log: slog.New(slog.DiscardHandler),
		win: newWindow(vc, time.Minute, 300, false), cfg: &queueConfig{fetchWait: 5 * time.Second}}
	c.size.Store(2)
	c.backlog.Store(1 << 20) // a backlog larger than any fetch
	steps := []struct {
		asked, got int
		took       time.Duration
		want       int
	}{
		{2, 2, 0, 16},                           // no time at all: the most growth, 8 times
		{16, 16, 10 * time.Millisecond, 128},    // 10 ms: 10 times would fit, 8 at most
		{128, 128, 40 * time.Millisecond, 256},  // 40 ms: at least double
		{256, 256, 20 * time.Millisecond, 300},  // capped at the ceiling
		{300, 300, 150 * time.Millisecond, 300}, // over batching.Cycle, under four times: kept
		{300, 300, 500 * time.Millisecond, 150}, // slower than four times batching.Cycle: halved
		{150, 70, 10 * time.Millisecond, 75},    // under half full: halved
		{1, 1, 0, 75},                           // the window asked for less: no growth
		{75, 0, 5 * time.Second, 37},            // expired with nothing
		{37, 0, 5 * time.Second, 18},
		{18, 0, 5 * time.Second, 9},
		{9, 0, 5 * time.Second, 4},
		{4, 0, 5 * time.Second, 2},
		{2, 0, 5 * time.Second, 2}, // never below the worker count
	}
	for i, s := range steps {
		f := &fetch{asked: s.asked, at: vc.Now()}
		f.got.Store(int32(s.got))
		vc.Advance(s.took)
		c.adapt(f)
		if got := int(c.size.Load()); got != s.want {
			t.Fatalf("step %d (asked %d, got %d, took %v): size %d; want %d", i, s.asked, s.got, s.took, got, s.want)
		}
		if got, _ := c.fetchSize(); got != s.want {
			t.Fatalf("step %d: fetchSize %d; want %d", i, got, s.want)
		}
	}
	// The window bounds it: after a suspect delivery, one message at a time.
	c.win.suspect()
	if got, _ := c.fetchSize(); got != 1 {
		t.Fatalf("fetchSize in a suspect stretch %d; want 1", got)
	}
}

// TestFetchSizeFollowsTheBacklog: a pull request asks for no more than the stream holds for the
// consumer (at least one) and waits FetchWait, unless the last fetch came back full: then it
// asks for the whole size and waits no longer than flowWait.
func TestFetchSizeFollowsTheBacklog(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &consumer{base: 16, batch: 300, clock: vc, win: newWindow(vc, time.Minute, 300, false),
		cfg: &queueConfig{fetchWait: 5 * time.Second}}
	c.size.Store(16)
	cases := []struct {
		backlog   int64
		flowing   bool
		fetchWait time.Duration
		n         int
		wait      time.Duration
	}{
		{1000, false, 5 * time.Second, 16, 5 * time.Second},
		{3, false, 5 * time.Second, 3, 5 * time.Second},
		{0, false, 5 * time.Second, 1, 5 * time.Second}, // idle: one message
		{0, true, 5 * time.Second, 16, flowWait},        // flowing: the size, briefly
		{3, true, 50 * time.Millisecond, 16, 50 * time.Millisecond},
	}
	for _, k := range cases {
		c.backlog.Store(k.backlog)
		c.flowing.Store(k.flowing)
		c.cfg.fetchWait = k.fetchWait
		if n, wait := c.fetchSize(); n != k.n || wait != k.wait {
			t.Errorf("backlog %d, flowing %v, FetchWait %v: asks %d for %v; want %d for %v", k.backlog, k.flowing, k.fetchWait, n, wait, k.n, k.wait)
		}
	}
}

// TestFetchEndedSizesOnce: every worker waiting on a fetch sees it end, but only the first sizes
// the next: eight workers seeing a slow fetch end halve the size once, not eight times.
func TestFetchEndedSizesOnce(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &consumer{base: 2, batch: 300, clock: vc, log: slog.New(slog.DiscardHandler),
		win: newWindow(vc, time.Minute, 300, false), cfg: &queueConfig{fetchWait: 5 * time.Second}}
	c.size.Store(64)
	f := &fetch{asked: 64, at: vc.Now(), cancel: func() {}}
	f.got.Store(64)
	c.cur = f
	vc.Advance(time.Second) // slower than 4 × batching.Cycle: halve
	for range 8 {
		c.fetchEnded(f)
	}
	if got := c.size.Load(); got != 32 {
		t.Fatalf("size %d after eight workers saw one slow fetch of 64 end; want 32 (halved once)", got)
	}
	if !c.flowing.Load() {
		t.Fatal("a fetch that came back full left the subscription not flowing")
	}
}

// TestPullWaitAfterReconnection: a pull request waits its fetch's time on the server, except
// while the connection is down and for recoverFor after it came back: then recoverWait at most,
// so that a request the server lost around a restart holds the subscription that long only.
func TestPullWaitAfterReconnection(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &consumer{clock: vc}
	steps := []struct {
		name      string
		advance   time.Duration
		reconnect bool
		connected bool
		wait      time.Duration
		want      time.Duration
	}{
		{"never reconnected", 0, false, true, 5 * time.Second, 5 * time.Second},
		{"down before any reconnection", 0, false, false, 5 * time.Second, recoverWait},
		{"just reconnected", 0, true, true, 5 * time.Second, recoverWait},
		{"a flowing fetch's shorter wait stands", 0, false, true, flowWait, flowWait},
		{"at the end of recoverFor", recoverFor, false, true, 5 * time.Second, recoverWait},
		{"past recoverFor", time.Millisecond, false, true, 5 * time.Second, 5 * time.Second},
		{"down again, long after", time.Hour, false, false, 5 * time.Second, recoverWait},
	}
	for _, s := range steps {
		vc.Advance(s.advance)
		if s.reconnect {
			c.reconnectedAt.Store(vc.Now().UnixNano())
		}
		if got := c.pullWait(s.wait, s.connected); got != s.want {
			t.Errorf("%s: pullWait(%v, connected %v) = %v; want %v", s.name, s.wait, s.connected, got, s.want)
		}
	}
}
