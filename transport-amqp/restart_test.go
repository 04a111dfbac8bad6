package amqp_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// trialSize is the number of messages per queue of the broker trials: a bounded profile by
// default (CI), the full size with SETTLE_AMQP_TRIAL_FULL=1.
func trialSize(bounded, full int) int {
	if os.Getenv("SETTLE_AMQP_TRIAL_FULL") == "1" {
		return full
	}
	return bounded
}

// Issue 25's proof: a RabbitMQ node of the test's own, a classic and a quorum queue (each with
// DLXTTL and DeadLetterAfter(3)) seeded with the trial mix (80% ack, 10% retry once, 5%
// RetryAfter(200ms) once through the waiting queue, 5% always retry), the broker stopped
// gracefully a quarter through the drain and killed (kill -9) at two thirds, restarted each
// time, the service never restarted. Read back with a bare client: nothing lost on either
// queue, every dead letter present with its count; duplicates (acknowledgements the broker
// lost, settlements redone) are counted and reported.
func TestBrokerRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a RabbitMQ node (~1 min)")
	}
	total := trialSize(1500, 10000)
	ns := startNodes(t, 1, 5690, "settle-amqp-r")
	url := ns.urls[0]
	l := newLedger()
	app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals(), core.WithObserver(l.observe),
		core.WithShutdownTimeout(5*time.Second))
	b, err := amqp.New(amqp.URLs(url), amqp.DeclareTopology(true), amqp.ReconnectBackoff(100*time.Millisecond, time.Second),
		amqp.CopyRetryBackoff(100*time.Millisecond, time.Second), amqp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(b)
	queues := map[string]string{"classic": "trial.classic", "quorum": "trial.quorum"}
	var opened []chan struct{}
	for _, k := range kinds {
		q := queues[k.name]
		ep := endpointOf(t, b, k.quorum, q, amqp.DLXTTL(), amqp.Prefetch(50))
		ch := make(chan struct{})
		opened = append(opened, ch)
		if err := core.Subscribe(app, notifyOpen{ep, ch}, trialHandler(l, 20*time.Millisecond), rawCodec, core.Workers(4), core.DeadLetterAfter(trialCap, q+".dead")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = app.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for _, ch := range opened {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatal("the subscriptions did not open")
		}
	}
	for _, q := range queues {
		seed(t, url, q, 0, total)
	}
	start := time.Now()
	phase := func(frac float64, what string, act func()) {
		for _, q := range queues {
			l.waitFinished(t, q, int(float64(total)*frac), 5*time.Minute)
		}
		t.Logf("%v: %s with %d/%d and %d/%d finished", time.Since(start).Round(100*time.Millisecond), what,
			l.finished(queues["classic"]), total, l.finished(queues["quorum"]), total)
		act()
	}
	phase(0.25, "graceful stop", func() { ns.do("stop-node", 1); ns.do("start-node", 1) })
	phase(0.66, "kill -9", func() { ns.do("kill-node", 1); ns.do("start-node", 1) })
	for _, q := range queues {
		l.waitFinished(t, q, total, 5*time.Minute)
	}
	cancel()
	<-done
	if runErr != nil {
		t.Fatalf("App.Run: %v", runErr)
	}
	t.Logf("drained in %v; %d settlements failed (their messages came back); copy stats %+v",
		time.Since(start).Round(100*time.Millisecond), l.failed, b.CopyStats())
	t.Log(trialHeader)
	for _, k := range kinds {
		q := queues[k.name]
		row := l.check(t, url, k.name, q, q+".dead", total)
		if row.DeadLetters < total/20 {
			t.Errorf("%s: %d dead letters, want at least %d", k.name, row.DeadLetters, total/20)
		}
		// A classic queue counts only attempts a handler ran, so the kill -9, which flags every
		// recovered message redelivered, cannot dead-letter a message early (issue 42, item 10).
		if !k.quorum && row.EarlyDead > 0 {
			t.Errorf("%s: %d messages that always fail dead-lettered after fewer than %d handler runs", k.name, row.EarlyDead, trialCap)
		}
		t.Log(row.String())
	}
}
