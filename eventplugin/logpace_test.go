package eventplugin

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// A plugin that crashes on every call it can serve, its events failing ten times a second
// for half a minute on the virtual clock: the host logs one line per failure at most and no
// more than one line of each kind (crash, failed events, restart) per
// sqlqueue.FailureLogInterval, each counting the failures it stands for; go-plugin's own line
// about each exit is a debug line.
func TestCrashingPluginLogsAtTheEnginesPace(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &coretest.Logs{}
	p, err := loadHelper(t, "ok", WithClock(vc), RestartBackoff(time.Second, time.Second), WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	db := openSQLite(t)
	s, err := sqlqueue.NewSchema(db.dialect, queueTable("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	b := &binding{p: p, d: db.dialect, o: &core.Options{}, ph: PlaceholdersQuestion, ref: s.Table.Ref(),
		table: Table{Table: s.Table, QuotedName: s.QTable, Quoted: sqlqueue.Columns{ID: s.ID, LockedUntil: s.LockedUntil}}}
	ack := func(id int64) error {
		in := sqlqueue.EventInput{Kind: sqlqueue.EventAck, Form: sqlqueue.FormLease, Dialect: "sqlite", Queue: "jobs",
			Table: s.Table.Ref(), Now: vc.Now(), ID: id, Attempt: 1, Token: vc.Now()}
		_, err := b.event(EventAck)(context.Background(), in)
		return err
	}

	const step = 100 * time.Millisecond
	start := vc.Now()
	var crashes, unavailable int
	var restartAt time.Time
	// fail makes one failure of each kind: the crash when the plugin is up, then an event
	// that finds it down.
	fail := func() {
		t.Helper()
		if up, _ := p.state(); up {
			if err := ack(idCrash); !errors.Is(err, ErrCrashed) {
				t.Fatalf("ack of the crashing row at +%v: %v, want ErrCrashed", vc.Now().Sub(start), err)
			}
			crashes++
			restartAt = vc.Now().Add(time.Second)
		}
		if err := ack(1); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("ack while the plugin is down at +%v: %v, want ErrUnavailable", vc.Now().Sub(start), err)
		}
		unavailable++
	}
	advance := func(d time.Duration) {
		t.Helper()
		vc.Advance(d)
		if !vc.Now().Before(restartAt) {
			waitUp(t, p)
		}
	}
	for vc.Now().Sub(start) < 30*time.Second {
		fail()
		advance(step)
	}
	// One interval later, one failure of each kind flushes the counts of those held back.
	advance(sqlqueue.FailureLogInterval)
	fail()
	elapsed := vc.Now().Sub(start)
	p.Close() // waits for the kills, and go-plugin's lines about them

	bound := 1 + int(elapsed/sqlqueue.FailureLogInterval)
	for _, c := range []struct {
		msg      string
		failures int
	}{
		{"eventplugin: plugin failed during an event; restarting it", crashes},
		{"eventplugin: events failing; each failed row returns as the form returns a failed statement", unavailable},
		{"eventplugin: plugin restarted", 0},
	} {
		var lines []coretest.Record
		for _, r := range logs.Records(slog.LevelInfo) {
			if r.Message == c.msg {
				lines = append(lines, r)
			}
		}
		if len(lines) == 0 || len(lines) > bound {
			t.Errorf("%d lines %q for %d failures in %v, want 1 to %d", len(lines), c.msg, c.failures, elapsed, bound)
		}
		if c.failures == 0 {
			continue
		}
		sum := 0
		for _, l := range lines {
			n, _ := l.Attrs["failures"].(int64)
			sum += int(n)
			if l.Attrs["plugin"] != "test-helper" || l.Attrs["event"] != "ack" || l.Attrs["queue"] != "jobs" || l.Attrs["message_id"] == nil {
				t.Errorf("line %q names %v, want plugin, event, queue and message", c.msg, l.Attrs)
			}
		}
		if sum != c.failures {
			t.Errorf("lines %q count %d failures, want %d", c.msg, sum, c.failures)
		}
	}
	if crashes < 20 || unavailable < 250 {
		t.Fatalf("%d crashes and %d failed events: the plugin did not crash as often as the test means", crashes, unavailable)
	}
	known := map[string]bool{
		"eventplugin: plugin failed during an event; restarting it":                                   true,
		"eventplugin: events failing; each failed row returns as the form returns a failed statement": true,
		"eventplugin: plugin restarted":                                                               true,
	}
	for _, r := range logs.Records(slog.LevelInfo) {
		if !known[r.Message] {
			t.Errorf("unexpected line at %v: %q %v", r.Level, r.Message, r.Attrs)
		}
	}
	if n := len(logs.Find(exitMessage)); n < crashes {
		t.Errorf("%d debug lines %q for %d crashes", n, exitMessage, crashes)
	}
}
