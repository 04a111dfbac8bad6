//go:build cgo

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// BenchmarkScaling drains a queue of N messages (no-op handler, ack removes the message) at a
// growing concurrency — 1, 2, 4, 8 and 16 by default — per backend and form, beside the raw loop
// of bench that runs the same statements or frames by hand at the same concurrency, where bench
// has one:
//
//   - sqlite lease (dialect-sqlite, synchronous=FULL): settle with one subscription of X workers
//     (drainSQLiteOpts, claims of 100 rows); the raw loop (rawSQLiteLease) is one claimant, so it
//     runs at X = 1 only (SQLite has one writer at a time).
//   - postgres lease / rowlock, mariadb lease / rowlock: the raw loop with X workers (X
//     claimants: rawLeasePipelined, rawRowLock, myRawLease, myRawRowLock), settle with X
//     subscriptions of one worker each (X claimants, the like-for-like shape) and settle with one
//     subscription of X workers (one claimant); claims of 100 rows everywhere.
//   - rabbitmq classic / quorum: settle with one subscription of X workers at prefetch P
//     (settleAMQP); the raw loop (rawAMQP, one consumer, ack multiple every 50) at X = 1.
//   - nats: settle with one subscription of X workers fetching batches of 50 (settleNATS); the
//     raw loop (rawNATS, one consumer, ack each) at X = 1.
//
// Each case runs its points in interleaved rounds (each round starts at another point), every
// drain on a fresh table, database, queue or stream; the table gives each point's median msgs/s
// with the range of its rounds, settle ÷ raw at the same X (ratio of medians), and where each
// curve peaks.
//
//	SETTLE_BENCH_SCALING_ONLY=postgres go test -run '^$' -bench 'BenchmarkScaling$' -benchtime 1x ./bench
//
// SETTLE_BENCH_SCALING_ONLY picks cases by fragments of their names ("sqlite", "postgres",
// "postgres rowlock", "mariadb lease", "rabbitmq", "rabbitmq quorum", "nats"; comma-separated),
// SETTLE_BENCH_SCALING_WHO contenders ("raw", "subs×1", "1 sub×"), SETTLE_BENCH_SCALING_N
// messages per drain (default 20000), SETTLE_BENCH_SCALING_ROUNDS (default 3),
// SETTLE_BENCH_SCALING_WORKERS the counts (default 1,2,4,8,16), SETTLE_BENCH_SCALING_PREFETCH
// RabbitMQ's prefetch (default 50).
func BenchmarkScaling(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SCALING_N", 20000)
	rounds := envInt(b, "SETTLE_BENCH_SCALING_ROUNDS", 3)
	xs := scalingCounts(b)
	prefetch := envInt(b, "SETTLE_BENCH_SCALING_PREFETCH", 50)
	cases := []scaleCase{
		sqliteScaling(xs),
		pgScaling("lease", xs), pgScaling("rowlock", xs),
		myScaling("lease", xs), myScaling("rowlock", xs),
		amqpScaling(false, prefetch, xs), amqpScaling(true, prefetch, xs),
		natsScaling(xs),
	}
	for range b.N {
		for _, c := range cases {
			if !picked("SETTLE_BENCH_SCALING_ONLY", c.name) {
				continue
			}
			runScaleCase(b, c, n, rounds)
		}
	}
}

// scalingCounts is SETTLE_BENCH_SCALING_WORKERS: the concurrencies, ascending.
func scalingCounts(b *testing.B) []int {
	var xs []int
	for _, f := range strings.Split(coretest.Env("SETTLE_BENCH_SCALING_WORKERS", "1,2,4,8,16"), ",") {
		x, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || x < 1 {
			b.Fatalf("SETTLE_BENCH_SCALING_WORKERS=%q: want positive integers, comma-separated", os.Getenv("SETTLE_BENCH_SCALING_WORKERS"))
		}
		xs = append(xs, x)
	}
	slices.Sort(xs)
	return slices.Compact(xs)
}

// scaleCase is one backend and form: its points, and how to reach its server.
type scaleCase struct {
	name    string // "postgres lease"
	backend string // the record's backend: "postgres"
	// open checks the server and returns what the points share (an admin pool) and its release;
	// an error means the server is unreachable.
	open   func(ctx context.Context) (env any, release func(), err error)
	series []scaleSeries // in the order they are reported and recorded: each raw loop before its settle series
	note   string        // printed under the table: what X means
}

// scaleSeries is one contender of a case: a curve over the counts it runs at.
type scaleSeries struct {
	name string
	xs   []int
	// drain drains n messages at concurrency x and returns msgs/s; it fails the benchmark on error.
	drain func(b *testing.B, env any, n, x int) float64
}

var scaleSeq atomic.Int64 // distinct names for tables, queues and streams within one process

func runScaleCase(b *testing.B, c scaleCase, n, rounds int) {
	ctx := context.Background()
	env, release, err := c.open(ctx)
	if err != nil {
		if coretest.RequireServers() {
			b.Fatalf("scaling %s: server required (SETTLE_REQUIRE_SERVERS=1) but unreachable: %v", c.name, err)
		}
		fmt.Printf("\nscaling %s: skipped, server unreachable: %v\n", c.name, err)
		return
	}
	defer release()
	type pt struct {
		s *scaleSeries
		x int
	}
	var pts []pt
	for i := range c.series {
		s := &c.series[i]
		if !picked("SETTLE_BENCH_SCALING_WHO", s.name) {
			continue
		}
		for _, x := range s.xs {
			pts = append(pts, pt{s, x})
		}
	}
	if len(pts) == 0 {
		return
	}
	rates := map[string]map[int][]float64{}
	for r := range rounds {
		for i := range pts {
			p := pts[(i+r*len(pts)/rounds)%len(pts)] // each round starts at another point
			rate := p.s.drain(b, env, n, p.x)
			if rates[p.s.name] == nil {
				rates[p.s.name] = map[int][]float64{}
			}
			rates[p.s.name][p.x] = append(rates[p.s.name][p.x], rate)
		}
	}
	reportScaling(b, c, n, rounds, rates)
}

// reportScaling prints a case's table (a row per contender, a column per count), settle ÷ the
// raw loop recorded before it at the same count, and each curve's peak, and records every point.
func reportScaling(b *testing.B, c scaleCase, n, rounds int, rates map[string]map[int][]float64) {
	var xs []int
	for _, byX := range rates {
		for x := range byX {
			xs = append(xs, x)
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nscaling %s, N=%d, %d interleaved rounds, load average %.1f; msgs/s median (min–max)\n\n", c.name, n, rounds, loadAverage())
	fmt.Fprintf(&sb, "| contender |")
	for _, x := range xs {
		fmt.Fprintf(&sb, " %d |", x)
	}
	fmt.Fprintf(&sb, " peak |\n| --- |%s ---: |\n", strings.Repeat(" ---: |", len(xs)))
	var raw string // the raw loop of the form, for the ratios
	var ratioRows []string
	for _, s := range c.series {
		byX := rates[s.name]
		if byX == nil {
			continue
		}
		isRaw := strings.HasPrefix(s.name, "raw")
		if isRaw {
			raw = s.name
		}
		fmt.Fprintf(&sb, "| %s |", s.name)
		peakX, peak := 0, 0.0
		var ratios strings.Builder
		hasRatio := false
		for _, x := range xs {
			vs, ok := byX[x]
			if !ok {
				fmt.Fprintf(&sb, " — |")
				fmt.Fprintf(&ratios, " — |")
				continue
			}
			m := med(vs)
			fmt.Fprintf(&sb, " %s |", spread(vs))
			if m > peak {
				peakX, peak = x, m
			}
			if rv, ok := rates[raw][x]; ok && !isRaw && raw != "" {
				fmt.Fprintf(&ratios, " %.2f |", m/med(rv))
				hasRatio = true
			} else {
				fmt.Fprintf(&ratios, " — |")
			}
			record(b, Record{Chart: "throughput", Backend: c.backend, Series: s.name, XName: "workers", X: float64(x), Unit: "msgs/s", Values: vs})
		}
		fmt.Fprintf(&sb, " X=%d: %.0f |\n", peakX, peak)
		if hasRatio {
			ratioRows = append(ratioRows, fmt.Sprintf("| %s ÷ %s |%s |", s.name, raw, ratios.String()))
		}
		b.ReportMetric(peak, metricName(c.name+" "+s.name)+"-peak-msgs/s")
	}
	if len(ratioRows) > 0 {
		fmt.Fprintf(&sb, "\n| ratio of medians |")
		for _, x := range xs {
			fmt.Fprintf(&sb, " %d |", x)
		}
		fmt.Fprintf(&sb, " |\n| --- |%s --- |\n", strings.Repeat(" ---: |", len(xs)))
		for _, r := range ratioRows {
			sb.WriteString(r + "\n")
		}
	}
	if c.note != "" {
		fmt.Fprintf(&sb, "\n%s\n", c.note)
	}
	fmt.Print(sb.String()) // b.Log would cut the table at ten lines
}

// sqliteScaling: one lease subscription of X workers on dialect-sqlite, beside the raw loop's one
// claimant.
func sqliteScaling(xs []int) scaleCase {
	return scaleCase{
		name: "sqlite lease", backend: "sqlite",
		open: func(context.Context) (any, func(), error) { return nil, func() {}, nil },
		series: []scaleSeries{
			{"raw lease (1 claimant, B=100)", []int{1}, func(b *testing.B, _ any, n, _ int) float64 {
				return rawSQLiteLease(b, n, 100)
			}},
			{"settle lease, 1 sub×X workers (B=100)", xs, func(b *testing.B, _ any, n, x int) float64 {
				rate, _ := drainSQLiteOpts(b, cgoSQLite{}, n, x, false, sqlqueue.BatchSize(100))
				return rate
			}},
		},
		note: "X = workers of the one subscription; the raw loop is one claimant (X = 1 only).",
	}
}

// pgScaling: the raw loop of the form with X workers, settle with X subscriptions of one worker
// and with one subscription of X workers.
func pgScaling(form string, xs []int) scaleCase {
	loop, ep, rawName := rawLeasePipelined, postgres.Lease, "raw lease pipelined (X workers, B=100)"
	if form == "rowlock" {
		loop, ep, rawName = rawRowLock, postgres.RowLock, "raw rowlock batched (X workers, B=100)"
	}
	return scaleCase{
		name: "postgres " + form, backend: "postgres",
		open: func(ctx context.Context) (any, func(), error) {
			admin, err := pgxpool.New(ctx, pgURL())
			if err == nil {
				err = admin.Ping(ctx)
			}
			if err != nil {
				return nil, nil, err
			}
			return admin, admin.Close, nil
		},
		series: []scaleSeries{
			{rawName, xs, func(b *testing.B, env any, n, x int) float64 {
				return pgScalingDrain(b, env.(*pgxpool.Pool), n, rawContender(rawName, loop, x, 100))
			}},
			{"settle " + form + ", X subs×1 worker (B=100)", xs, func(b *testing.B, env any, n, x int) float64 {
				return pgScalingDrain(b, env.(*pgxpool.Pool), n,
					settleContender(form, max(8, x+4), x, ep, core.Workers(1), sqlqueue.BatchSize(100)))
			}},
			{"settle " + form + ", 1 sub×X workers (B=100)", xs, func(b *testing.B, env any, n, x int) float64 {
				return pgScalingDrain(b, env.(*pgxpool.Pool), n,
					settleContender(form, 8, 1, ep, core.Workers(x), sqlqueue.BatchSize(100)))
			}},
		},
		note: "X = claimants (raw workers, settle subscriptions of one worker each) or workers of one subscription.",
	}
}

// pgScalingDrain seeds a fresh schema with n rows and drains it once with c, as
// pgScalingDrain drains n jobs with one contender in a schema of its own, one round, and returns msgs/s.
func pgScalingDrain(b *testing.B, admin *pgxpool.Pool, n int, c pgContender) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := fmt.Sprintf("settle_scaling_%d_%d", os.Getpid(), scaleSeq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+s+" CASCADE") }()
	pgSeedSchema(ctx, b, admin, s, n)
	pool := pgContenderPool(ctx, b, c.conns, nil)
	defer pool.Close()
	took, err := c.drain(ctx, pool, s, n)
	if err != nil {
		b.Fatalf("scaling postgres %s: %v", c.name, err)
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{s, "q"}.Sanitize()).Scan(&left); err != nil {
		b.Fatal(err)
	}
	if left != 0 {
		b.Fatalf("scaling postgres %s: %d rows left in the table", c.name, left)
	}
	return float64(n) / took.Seconds()
}

// myScalingEnv is what the MariaDB points share: the admin pool and the parsed DSN.
type myScalingEnv struct {
	admin *sql.DB
	cfg   *gomysql.Config
}

// myScaling: the raw loop of the form with X workers, settle with X subscriptions of one worker
// and with one subscription of X workers, each through runMyRound (a fresh database each).
func myScaling(form string, xs []int) scaleCase {
	loop, ep, rawName := myRawLease, mysql.Lease, "raw lease (X workers, B=100)"
	if form == "rowlock" {
		loop, ep, rawName = myRawRowLock, mysql.RowLock, "raw rowlock (X workers, B=100)"
	}
	drain := func(b *testing.B, env any, n int, c myContender) float64 {
		e := env.(myScalingEnv)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		return runMyRound(ctx, b, e.admin, e.cfg, n, []myContender{c}, []int{0})[0].rate
	}
	return scaleCase{
		name: "mariadb " + form, backend: "mariadb",
		open: func(ctx context.Context) (any, func(), error) {
			admin, cfg, err := myAdmin(ctx)
			if err != nil {
				return nil, nil, err
			}
			return myScalingEnv{admin, cfg}, func() { _ = admin.Close() }, nil
		},
		series: []scaleSeries{
			{rawName, xs, func(b *testing.B, env any, n, x int) float64 {
				return drain(b, env, n, myRaw(rawName, loop, x, 100))
			}},
			{"settle " + form + ", X subs×1 worker (B=100)", xs, func(b *testing.B, env any, n, x int) float64 {
				return drain(b, env, n, mySettle(form, ep, x, 1, 100))
			}},
			{"settle " + form + ", 1 sub×X workers (B=100)", xs, func(b *testing.B, env any, n, x int) float64 {
				return drain(b, env, n, mySettle(form, ep, 1, x, 100))
			}},
		},
		note: "X = claimants (raw workers, settle subscriptions of one worker each) or workers of one subscription.",
	}
}

// amqpScaling: one settle subscription of X workers on a classic or quorum queue at prefetch p,
// beside the raw consumer (ack multiple every 50) at X = 1.
func amqpScaling(quorum bool, p int, xs []int) scaleCase {
	kind := "classic"
	if quorum {
		kind = "quorum"
	}
	drain := func(b *testing.B, n int, d func(ctx context.Context, queue string, quorum bool, prefetch, n int) (time.Duration, error)) float64 {
		q := fmt.Sprintf("settle-bench-scaling-%s-%d-%d", kind, os.Getpid(), scaleSeq.Add(1))
		if err := seedAMQP(q, quorum, n); err != nil {
			b.Fatalf("seed %s: %v", q, err)
		}
		defer deleteAMQP(q)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		took, err := d(ctx, q, quorum, p, n)
		if err != nil {
			b.Fatalf("scaling rabbitmq %s: %v", kind, err)
		}
		return float64(n) / took.Seconds()
	}
	return scaleCase{
		name: "rabbitmq " + kind, backend: "rabbitmq",
		open: func(context.Context) (any, func(), error) {
			c, err := amqp091.Dial(amqpURL())
			if err != nil {
				return nil, nil, err
			}
			_ = c.Close()
			return nil, func() {}, nil
		},
		series: []scaleSeries{
			{fmt.Sprintf("raw %s multiple/50 (1 consumer, prefetch %d)", kind, p), []int{1}, func(b *testing.B, _ any, n, _ int) float64 {
				return drain(b, n, rawAMQP(50))
			}},
			{fmt.Sprintf("settle %s, 1 sub×X workers (prefetch %d)", kind, p), xs, func(b *testing.B, _ any, n, x int) float64 {
				return drain(b, n, settleAMQP(x))
			}},
		},
		note: "X = workers of the one subscription (one consumer, one channel); the raw loop is one consumer (X = 1 only).",
	}
}

// natsScaling: one settle subscription of X workers fetching batches of 50, beside the raw
// consumer (Fetch(50), ack each) at X = 1.
func natsScaling(xs []int) scaleCase {
	const batch = 50
	type env struct {
		nc *nats.Conn
		js jetstream.JetStream
	}
	drain := func(b *testing.B, e any, n int, d func(ctx context.Context, stream, subject string, batch, n int) (time.Duration, error)) float64 {
		js := e.(env).js
		stream := fmt.Sprintf("settle_scaling_%d_%d", os.Getpid(), scaleSeq.Add(1))
		subject := strings.ReplaceAll(stream, "_", ".")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		defer func() { _ = js.DeleteStream(context.Background(), stream) }()
		if err := seedNATS(ctx, js, stream, subject, jetstream.AckExplicitPolicy, n); err != nil {
			b.Fatalf("seed %s: %v", stream, err)
		}
		took, err := d(ctx, stream, subject, batch, n)
		if err != nil {
			b.Fatalf("scaling nats: %v", err)
		}
		return float64(n) / took.Seconds()
	}
	return scaleCase{
		name: "nats", backend: "nats",
		open: func(context.Context) (any, func(), error) {
			nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.MaxReconnects(0))
			if err != nil {
				return nil, nil, err
			}
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
			if err != nil {
				nc.Close()
				return nil, nil, err
			}
			return env{nc, js}, nc.Close, nil
		},
		series: []scaleSeries{
			{"raw ack-each (1 consumer, Fetch(50))", []int{1}, func(b *testing.B, e any, n, _ int) float64 {
				return drain(b, e, n, rawNATS(false))
			}},
			{"settle, 1 sub×X workers (FetchBatch(50))", xs, func(b *testing.B, e any, n, x int) float64 {
				return drain(b, e, n, settleNATS(x))
			}},
		},
		note: "X = workers of the one subscription (one pull consumer); the raw loop is one consumer (X = 1 only).",
	}
}
