package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// latencyMode is one way a subscription learns of a row published by another process.
type latencyMode struct {
	name   string
	notify bool
	poll   time.Duration
}

// stamp is the latency benchmark's payload: when the publisher started publishing it.
type stamp struct {
	Sent int64 `json:"sent"`
}

// publishLatency publishes m messages one at a time from a second pool (as another process
// would: the subscriber's in-process wake-up does not reach it), waits for each to reach the
// handler (after one warm-up message), then pauses a random time (up to the poll interval when polling, so that publishes
// land at every phase of a poll; up to 20 ms with NOTIFY), and returns the publish→handler
// latencies.
func publishLatency(ctx context.Context, b *testing.B, s string, mode latencyMode, m int) []time.Duration {
	sub, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	other, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	subDB, err := postgres.New(context.Background(), sub, postgres.Notify(mode.notify))
	if err != nil {
		b.Fatal(err)
	}
	pubDB, err := postgres.New(context.Background(), other, postgres.Notify(mode.notify))
	if err != nil {
		b.Fatal(err)
	}
	pub, err := postgres.NewPublisher(pubDB, benchTable(s), "")
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan time.Duration, 1)
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	app.Register(subDB)
	ep, err := postgres.Lease(subDB, benchTable(s), "")
	if err != nil {
		b.Fatal(err)
	}
	if err := core.Subscribe(app, ep, func(_ context.Context, msg *core.Message[stamp]) error {
		got <- time.Since(time.Unix(0, msg.Payload.Sent))
		return nil
	}, sqlqueue.PollInterval(mode.poll)); err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	gap := mode.poll
	if mode.notify {
		gap = 20 * time.Millisecond
	}
	lat := make([]time.Duration, 0, m)
	// One message first, not counted: it opens the publisher's connection and prepares its
	// statement, which would otherwise be the worst latency of every run.
	for i := range m + 1 {
		// Pacing the publisher is the workload (a random gap before each publish), not a wait
		// for an effect.
		<-time.After(time.Duration(rng.Int64N(int64(gap))))
		if _, err := sqlqueue.Publish(ctx, pub, stamp{Sent: time.Now().UnixNano()}); err != nil {
			b.Fatal(err)
		}
		select {
		case d := <-got:
			if i > 0 {
				lat = append(lat, d)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("%s: a message did not arrive within 30 s", mode.name)
		}
	}
	return lat
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkPostgresLatency reports publish→handler latency p50/p99 when the publisher is
// another process: LISTEN/NOTIFY against polling at the default interval and at 100 ms.
func BenchmarkPostgresLatency(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	admin, err := pgxpool.New(ctx, pgURL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(b, "PostgreSQL", pgURL(), err)
	}
	defer admin.Close()
	modes := []latencyMode{
		{"NOTIFY (poll 1s as fallback)", true, sqlqueue.DefaultPollInterval},
		{"polling every 1s (default)", false, sqlqueue.DefaultPollInterval},
		{"polling every 100ms", false, 100 * time.Millisecond},
	}
	const m = 100
	for range b.N {
		var sb strings.Builder
		fmt.Fprintf(&sb, "\npublish→handler latency, publisher in another pool, %d messages one at a time\n", m)
		fmt.Fprintf(&sb, "%-32s %10s %10s\n", "mode", "p50", "p99")
		for i, mode := range modes {
			s := fmt.Sprintf("settle_lat_%d_%d", os.Getpid(), i)
			if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
				b.Fatal(err)
			}
			if _, err := admin.Exec(ctx, pgBenchDDL(s)); err != nil {
				b.Fatal(err)
			}
			lat := publishLatency(ctx, b, s, mode, m)
			if _, err := admin.Exec(ctx, "DROP SCHEMA "+s+" CASCADE"); err != nil {
				b.Fatal(err)
			}
			p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
			fmt.Fprintf(&sb, "%-32s %10s %10s\n", mode.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
			b.ReportMetric(float64(p50.Microseconds())/1000, metricName(mode.name)+"-p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, metricName(mode.name)+"-p99-ms")
			record(b, Record{Chart: "latency", Backend: "postgres", Series: mode.name, XName: "percentile", X: 50, Unit: "ms", Values: []float64{float64(p50.Microseconds()) / 1000}})
			record(b, Record{Chart: "latency", Backend: "postgres", Series: mode.name, XName: "percentile", X: 99, Unit: "ms", Values: []float64{float64(p99.Microseconds()) / 1000}})
		}
		fmt.Print(sb.String()) // b.Log would cut the table at ten lines
	}
}
