package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// pgURL is the PostgreSQL the benchmarks drain on.
func pgURL() string {
	return coretest.Env("SETTLE_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// pgBenchN is the number of jobs each contender drains (SETTLE_BENCH_PG_N, default 100000).
func pgBenchN(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_PG_N", "100000"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_PG_N=%q: want a positive integer", os.Getenv("SETTLE_BENCH_PG_N"))
	}
	return n
}

// pgContender drains n rows that are already in schema s's table (seeded when seed is true;
// River seeds its own) and returns the time it took.
type pgContender struct {
	name  string
	seed  bool
	conns int
	drain func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error)
}

func rawContender(name string, loop rawLoop, w, b int) pgContender {
	return pgContender{name: name, seed: true, conns: w, drain: func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error) {
		start := time.Now()
		got, err := loop(ctx, pool, s, w, b)
		if err != nil {
			return 0, err
		}
		if got != int64(n) {
			return 0, fmt.Errorf("%s settled %d of %d rows", name, got, n)
		}
		return time.Since(start), nil
	}}
}

// pgResult is one contender's figure.
type pgResult struct {
	name  string
	rate  float64
	taken time.Duration
}

// runPGContenders runs each contender on a fresh schema of its own, one after the other in the
// same process and against the same server, and returns jobs/s per contender.
func runPGContenders(b *testing.B, cs []pgContender) []pgResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	n := pgBenchN(b)
	admin, err := pgxpool.New(ctx, pgURL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		coretest.ServerUnavailable(b, "PostgreSQL", pgURL(), err)
	}
	defer admin.Close()
	var out []pgResult
	for i, c := range cs {
		s := fmt.Sprintf("settle_bench_%d_%d", os.Getpid(), i)
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
			b.Fatal(err)
		}
		func() {
			defer func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+s+" CASCADE") }()
			if c.seed {
				if _, err := admin.Exec(ctx, pgBenchDDL(s)); err != nil {
					b.Fatal(err)
				}
				if err := pgSeed(ctx, admin, s, n); err != nil {
					b.Fatal(err)
				}
				if _, err := admin.Exec(ctx, "VACUUM ANALYZE "+s+".q"); err != nil {
					b.Fatal(err)
				}
			}
			cfg, err := pgxpool.ParseConfig(pgURL())
			if err != nil {
				b.Fatal(err)
			}
			cfg.MaxConns = int32(max(c.conns, 2))
			cfg.MinConns = cfg.MaxConns
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			taken, err := c.drain(ctx, pool, s, n)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			if c.seed {
				var left int
				if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{s, "q"}.Sanitize()).Scan(&left); err != nil {
					b.Fatal(err)
				}
				if left != 0 {
					b.Fatalf("%s: %d rows left in the table", c.name, left)
				}
			}
			out = append(out, pgResult{name: c.name, rate: float64(n) / taken.Seconds(), taken: taken})
		}()
	}
	return out
}

// reportPG prints the results as a table with each contender's ratio to base and to River.
func reportPG(b *testing.B, rs []pgResult, base, peer string) {
	find := func(name string) float64 {
		for _, r := range rs {
			if r.name == name {
				return r.rate
			}
		}
		return 0
	}
	bRate, pRate := find(base), find(peer)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-40s %10s %9s %9s\n", "contender", "jobs/s", "÷"+shortName(base), "÷"+shortName(peer))
	for _, r := range rs {
		fmt.Fprintf(&sb, "%-40s %10.0f %9.2f %9.2f\n", r.name, r.rate, ratio(r.rate, bRate), ratio(r.rate, pRate))
		b.ReportMetric(r.rate, metricName(r.name)+"-jobs/s")
	}
	b.Log(sb.String())
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func shortName(s string) string {
	if i := strings.IndexByte(s, ' '); i > 0 {
		return s[:i]
	}
	return s
}

func metricName(s string) string {
	return strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "", "=", "").Replace(s)
}

// BenchmarkPostgresRaw drains the queue with raw pgx loops and with River, to find the ceiling
// and the peer's figure on this machine.
func BenchmarkPostgresRaw(b *testing.B) {
	for range b.N {
		rs := runPGContenders(b, []pgContender{
			rawContender("raw lease per-message (w=16,B=100)", rawLeasePerMessage, 16, 100),
			rawContender("raw lease batched (w=4,B=100)", rawLeaseBatched, 4, 100),
			rawContender("raw lease batched (w=8,B=100)", rawLeaseBatched, 8, 100),
			rawContender("raw rowlock LIMIT 1 (w=8)", rawRowLock, 8, 1),
			rawContender("raw rowlock batched (w=4,B=100)", rawRowLock, 4, 100),
			{name: "river (MaxWorkers=2000,conns=16)", conns: 16, drain: func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error) {
				return riverDrain(ctx, pool, s, n, 2000)
			}},
		})
		reportPG(b, rs, "raw lease batched (w=4,B=100)", "river (MaxWorkers=2000,conns=16)")
	}
}

// BenchmarkPostgresSettle drains the queue through settle's lease and row-lock forms, the raw
// loops running the same statements, and River, interleaved in one run on one server.
func BenchmarkPostgresSettle(b *testing.B) {
	for range b.N {
		rs := runPGContenders(b, []pgContender{
			rawContender("raw lease batched (w=4,B=100)", rawLeaseBatched, 4, 100),
			settleContender("settle lease (w=8,B=100)", 8, postgres.Lease, core.Workers(8), sqlqueue.BatchSize(100)),
			settleContender("settle lease (w=32,B=100)", 8, postgres.Lease, core.Workers(32), sqlqueue.BatchSize(100)),
			rawContender("raw rowlock batched (w=4,B=100)", rawRowLock, 4, 100),
			settleContender("settle rowlock (w=8,B=100)", 8, postgres.RowLock, core.Workers(8), sqlqueue.BatchSize(100)),
			{name: "river (MaxWorkers=2000,conns=16)", conns: 16, drain: func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error) {
				return riverDrain(ctx, pool, s, n, 2000)
			}},
		})
		reportPG(b, rs, "raw lease batched (w=4,B=100)", "river (MaxWorkers=2000,conns=16)")
	}
}
