package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
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
	return coretest.PostgresURL()
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

// pgRounds is how many times each contender runs (SETTLE_BENCH_PG_ROUNDS, default 3).
func pgRounds(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_PG_ROUNDS", "3"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_PG_ROUNDS=%q: want a positive integer", os.Getenv("SETTLE_BENCH_PG_ROUNDS"))
	}
	return n
}

// runPGContenders runs each contender on a fresh schema of its own, in rounds that interleave
// the contenders in a balanced order (roundOrder), in the same process against the same server,
// and returns their jobs/s.
func runPGContenders(b *testing.B, cs []pgContender) []result {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
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
	cs = slices.DeleteFunc(slices.Clone(cs), func(c pgContender) bool { return !picked("SETTLE_BENCH_PG_WHO", c.name) })
	out := make([]result, len(cs))
	for round := range pgRounds(b) {
		for _, i := range roundOrder(round, len(cs)) {
			c := cs[i]
			out[i].name = c.name
			s := fmt.Sprintf("settle_bench_%d_%d", os.Getpid(), i)
			if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
				b.Fatal(err)
			}
			func() {
				defer func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+s+" CASCADE") }()
				if c.seed {
					pgSeedSchema(ctx, b, admin, s, n)
				}
				tr := newPGTrace()
				pool := pgContenderPool(ctx, b, c.conns, tr)
				defer pool.Close()
				taken, err := c.drain(ctx, pool, s, n)
				if err != nil {
					b.Fatalf("%s (round %d): %v", c.name, round+1, err)
				}
				if tr != nil {
					tr.report(c.name, n, taken)
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
				out[i].rates = append(out[i].rates, float64(n)/taken.Seconds())
			}()
		}
	}
	return out
}

// reportPG prints the results as a table: each contender's best and median round, and its
// best against base's best and peer's best.
func reportPG(b *testing.B, rs []result, base, peer string) {
	find := func(name string) float64 {
		for _, r := range rs {
			if r.name == name {
				return r.best()
			}
		}
		return 0
	}
	bRate, pRate := find(base), find(peer)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d jobs per drain, %d rounds; jobs/s best (median); ratios of bests\n", pgBenchN(b), len(rs[0].rates))
	fmt.Fprintf(&sb, "%-36s %16s %9s %9s\n", "contender", "jobs/s", "÷raw", "÷river")
	for _, r := range rs {
		fmt.Fprintf(&sb, "%-36s %7.0f (%6.0f) %9.2f %9.2f\n", r.name, r.best(), r.median(), ratio(r.best(), bRate), ratio(r.best(), pRate))
		b.ReportMetric(r.best(), metricName(r.name)+"-jobs/s")
		record(b, Record{Chart: "throughput", Backend: "postgres", Series: r.name, Unit: "msgs/s", Values: r.rates})
	}
	fmt.Print(sb.String()) // b.Log would cut the table at ten lines
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
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
			rawContender("raw lease engine stmts (w=1,B=100)", rawLeaseEngine, 1, 100),
			rawContender("raw lease engine stmts (w=4,B=100)", rawLeaseEngine, 4, 100),
			rawContender("raw lease pipelined (w=4,B=100)", rawLeasePipelined, 4, 100),
			settleContender("settle lease (1 sub,w=8,B=100)", 8, 1, postgres.Lease, core.Workers(8), sqlqueue.BatchSize(100)),
			settleContender("settle lease (1 sub,w=32,B=100)", 8, 1, postgres.Lease, core.Workers(32), sqlqueue.BatchSize(100)),
			settleContender("settle lease (4 subs,w=8,B=100)", 8, 4, postgres.Lease, core.Workers(8), sqlqueue.BatchSize(100)),
			rawContender("raw rowlock LIMIT 1 (w=8)", rawRowLock, 8, 1),
			rawContender("raw rowlock batched (w=4,B=100)", rawRowLock, 4, 100),
			rawContender("raw rowlock per-row (w=1,B=100)", rawRowLockPerRow, 1, 100),
			rawContender("raw rowlock per-row (w=4,B=100)", rawRowLockPerRow, 4, 100),
			settleContender("settle rowlock (1 sub,w=8,B=100)", 8, 1, postgres.RowLock, core.Workers(8), sqlqueue.BatchSize(100)),
			// CountAtClaim: what a subscription with DeadLetterAfter runs by default.
			settleContender("settle rowlock counted (1 sub,w=8,B=100)", 8, 1, postgres.RowLock, core.Workers(8), sqlqueue.BatchSize(100), sqlqueue.CountAtClaim(true)),
			settleContender("settle rowlock (4 subs,w=8,B=100)", 8, 4, postgres.RowLock, core.Workers(8), sqlqueue.BatchSize(100)),
			{name: "river (MaxWorkers=2000,conns=16)", conns: 16, drain: func(ctx context.Context, pool *pgxpool.Pool, s string, n int) (time.Duration, error) {
				return riverDrain(ctx, pool, s, n, 2000)
			}},
		})
		reportPG(b, rs, "raw lease batched (w=4,B=100)", "river (MaxWorkers=2000,conns=16)")
	}
}

// pgSeedSchema creates the benchmark's queue table in schema s, seeds n jobs and analyses it.
func pgSeedSchema(ctx context.Context, b *testing.B, admin *pgxpool.Pool, s string, n int) {
	b.Helper()
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

// pgContenderPool opens a contender's own pool of conns connections (at least 2), all opened
// before its drain starts; tr, when not nil, traces its statements (SETTLE_BENCH_PG_TRACE).
func pgContenderPool(ctx context.Context, b *testing.B, conns int, tr *pgTrace) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		b.Fatal(err)
	}
	if tr != nil {
		cfg.ConnConfig.Tracer = tr
	}
	cfg.MaxConns = int32(max(conns, 2))
	cfg.MinConns = cfg.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Every connection is opened before the drain's clock starts: the pool would otherwise
	// open its MinConns in the background during the drain (about 20 ms of the server's CPU
	// each here, a new backend forked and authenticated), charging a contender with more
	// connections for them.
	held := make([]*pgxpool.Conn, 0, cfg.MaxConns)
	for range cfg.MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	return pool
}
