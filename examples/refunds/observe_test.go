package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// TestObservabilityOfTheDemo runs the demo with -metrics and -trace: /metrics counts every
// settlement by outcome, /readyz answers while it runs and /livez says when it stopped, and a
// span is printed for every delivery.
func TestObservabilityOfTheDemo(t *testing.T) {
	var traces bytes.Buffer
	logs := &coretest.Logs{}
	obs, err := StartObservability("127.0.0.1:0", true, &traces, slog.New(logs)) // an HTTP port of the kernel's choosing
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get("http://" + obs.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the App exists: %d", code)
	}
	vc := clock.NewVirtual(epoch)
	cfg := Config{DB: filepath.Join(t.TempDir(), "refunds.db"), Backoff: 100 * time.Millisecond, Poll: 200 * time.Millisecond, Obs: obs}
	type answer struct {
		code    int
		metrics string
	}
	ready := make(chan answer, 1)
	var settled atomic.Int32 // observers run on the settling goroutines, several at once
	ran := make(chan error, 1)
	stopDriving := make(chan struct{})
	var out bytes.Buffer
	go func() {
		ran <- Run(context.Background(), cfg, &out, slog.New(logs), append(obs.AppOptions(), core.WithClock(vc),
			core.WithObserver(func(core.Settlement) {
				if settled.Add(1) == 1 { // while the App runs
					code, _ := get("/readyz")
					_, metrics := get("/metrics")
					ready <- answer{code, metrics}
				}
			}))...)
		close(stopDriving)
	}()
	driveClock(t, vc, 4, cfg.Poll, stopDriving)
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	running := <-ready
	if running.code != http.StatusOK {
		t.Errorf("/readyz while running: %d", running.code)
	}
	if !strings.Contains(running.metrics, `settle_queue_messages{messaging_destination_name="refunds",otel_scope_name=`) {
		t.Error("no queue depth gauge while running")
	}
	if code, body := get("/livez"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"state":"stopped"`) {
		t.Errorf("/livez after the demo: %d %s", code, body)
	}
	_, metrics := get("/metrics")
	count := func(outcome string) int {
		n := 0
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "settle_messages_settled_total{") && strings.Contains(l, `settle_outcome="`+outcome+`"`) &&
				strings.Contains(l, `messaging_destination_name="refunds"`) {
				var v int
				if _, err := fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v); err == nil {
					n += v
				}
			}
		}
		return n
	}
	// Two refunded, two declined, four dead letters after four failures each (two busy backing
	// off, two down retried at once).
	for outcome, want := range map[string]int{"ack": 2, "drop": 2, "dead_letter": 4, "retry_after": 8, "retry": 8} {
		if got := count(outcome); got != want {
			t.Errorf("settle_messages_settled_total{settle_outcome=%q} = %d, want %d", outcome, got, want)
		}
	}
	if strings.Contains(metrics, "settle_queue_messages{") {
		t.Error("queue depth still observed after the database closed")
	}
	if spans := strings.Count(traces.String(), `"Name":"process refunds"`); spans != 24 {
		t.Errorf("%d spans of refunds deliveries printed, want 24", spans)
	}
}
