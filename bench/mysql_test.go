package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/dialect-mysql"
)

// myURL is the MariaDB (or MySQL) the benchmarks drain on.
func myURL() string {
	return coretest.MariaDBDSN()
}

// myBenchN is the number of rows each contender drains (SETTLE_BENCH_MARIADB_N, default 50000).
func myBenchN(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_MARIADB_N", "50000"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_MARIADB_N=%q: want a positive integer", os.Getenv("SETTLE_BENCH_MARIADB_N"))
	}
	return n
}

// myContender drains n rows already seeded in the table q of a fresh database. db is opened
// with mysql.Open, so raw loops and settle run on identically set-up sessions.
type myContender struct {
	name  string
	conns int
	drain func(ctx context.Context, db *mysql.DB, n int) (time.Duration, error)
}

func myRaw(name string, loop myRawLoop, w, b int) myContender {
	return myContender{name: name, conns: w, drain: func(ctx context.Context, db *mysql.DB, n int) (time.Duration, error) {
		start := time.Now()
		got, err := loop(ctx, db.Pool(), w, b)
		if err != nil {
			return 0, err
		}
		if got != int64(n) {
			return 0, fmt.Errorf("settled %d of %d rows", got, n)
		}
		return time.Since(start), nil
	}}
}

// myResult is one contender's figure: the median of its rounds, with the spread.
type myResult struct {
	name             string
	rate             float64
	allocsPer        float64
	minRate, maxRate float64
	rates            []float64 // every round's, in round order
}

// myRounds is how often every contender drains (SETTLE_BENCH_MARIADB_ROUNDS, default 3); the
// rounds interleave the contenders in a balanced order (roundOrder), so that a noisy moment of
// the machine, or what the previous drain left behind, does not land on one of them only, and
// the report gives each one's median.
func myRounds(b *testing.B) int {
	n, err := strconv.Atoi(coretest.Env("SETTLE_BENCH_MARIADB_ROUNDS", "3"))
	if err != nil || n < 1 {
		b.Fatalf("SETTLE_BENCH_MARIADB_ROUNDS=%q: want a positive integer", os.Getenv("SETTLE_BENCH_MARIADB_ROUNDS"))
	}
	return n
}

// runMyContenders runs each contender on a fresh database of its own, one after the other in
// the same process and against the same server. SETTLE_BENCH_MARIADB_WHO runs only the
// contenders whose names contain one of its comma-separated fragments.
func runMyContenders(b *testing.B, cs []myContender) []myResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cs = slices.DeleteFunc(slices.Clone(cs), func(c myContender) bool { return !picked("SETTLE_BENCH_MARIADB_WHO", c.name) })
	n := myBenchN(b)
	admin, cfg := myAdminOrSkip(ctx, b)
	defer admin.Close()
	rounds := make([][]myResult, len(cs))
	for round := range myRounds(b) {
		for i, r := range runMyRound(ctx, b, admin, cfg, n, cs, roundOrder(round, len(cs))) {
			rounds[i] = append(rounds[i], r)
		}
	}
	out := make([]myResult, len(cs))
	for i, rs := range rounds {
		var rates []float64
		for _, r := range rs {
			rates = append(rates, r.rate)
		}
		slices.SortFunc(rs, func(x, y myResult) int { return cmp.Compare(x.rate, y.rate) })
		med := rs[len(rs)/2]
		med.minRate, med.maxRate = rs[0].rate, rs[len(rs)-1].rate
		med.rates = rates
		out[i] = med
	}
	return out
}

// runMyRound drains n rows once per contender, in the order given (indices into cs), and
// returns the results in cs's order.
func runMyRound(ctx context.Context, b *testing.B, admin *sql.DB, cfg *gomysql.Config, n int, cs []myContender, order []int) []myResult {
	out := make([]myResult, len(cs))
	for _, i := range order {
		c := cs[i]
		func() {
			db, drop := myFreshDB(ctx, b, admin, cfg, "", c.conns, n)
			defer drop()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			taken, err := c.drain(ctx, db, n)
			runtime.ReadMemStats(&after)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			var left int
			if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM q").Scan(&left); err != nil {
				b.Fatal(err)
			}
			if left != 0 {
				b.Fatalf("%s: %d rows left in the table", c.name, left)
			}
			out[i] = myResult{name: c.name, rate: float64(n) / taken.Seconds(),
				allocsPer: float64(after.Mallocs-before.Mallocs) / float64(n)}
		}()
	}
	return out
}

// myFreshDB creates a database of its own with the standard table holding n rows, and opens a
// pool on it with room for conns connections, all opened (through addr, when not empty, instead
// of the server's address); drop closes the pool and drops the database.
func myFreshDB(ctx context.Context, b *testing.B, admin *sql.DB, cfg *gomysql.Config, addr string, conns, n int) (*mysql.DB, func()) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "settle_bench_" + hex.EncodeToString(rnd[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	dropDB := func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+name) }
	dcfg := cfg.Clone()
	dcfg.DBName = name
	if addr != "" {
		dcfg.Addr, dcfg.TLSConfig = addr, "false"
	}
	db, err := mysql.Open(ctx, dcfg.FormatDSN())
	if err != nil {
		dropDB()
		b.Fatal(err)
	}
	drop := func() { db.Close(); dropDB() }
	db.Pool().SetMaxOpenConns(conns + 2)
	db.Pool().SetMaxIdleConns(conns + 2)
	if _, err := db.Pool().ExecContext(ctx, myBenchDDL); err != nil {
		drop()
		b.Fatal(err)
	}
	if err := mySeed(ctx, db.Pool(), n); err != nil {
		drop()
		b.Fatal(err)
	}
	// Every connection the pool may open is open before the drain's clock starts, so that no
	// contender is charged for opening more of them than another.
	held := make([]*sql.Conn, 0, conns+2)
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range conns + 2 {
		c, err := db.Pool().Conn(ctx)
		if err == nil {
			err = c.PingContext(ctx)
		}
		if err != nil {
			drop()
			b.Fatal(err)
		}
		held = append(held, c)
	}
	return db, drop
}

// reportMy prints the results with each contender's ratio to the raw loop of its form (the
// contender named in pairs) and reports msgs/s and allocs/msg as metrics.
func reportMy(b *testing.B, rs []myResult, pairs map[string]string) {
	rate := map[string]float64{}
	for _, r := range rs {
		rate[r.name] = r.rate
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-44s %10s %15s %11s %8s\n", "contender", "msgs/s", "(min–max)", "allocs/msg", "÷raw")
	for _, r := range rs {
		ratio := "—"
		if raw, ok := pairs[r.name]; ok && rate[raw] > 0 {
			ratio = fmt.Sprintf("%.2f", r.rate/rate[raw])
		}
		fmt.Fprintf(&sb, "%-44s %10.0f %15s %11.1f %8s\n", r.name, r.rate, fmt.Sprintf("(%.0f–%.0f)", r.minRate, r.maxRate), r.allocsPer, ratio)
		m := strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "", "=", "").Replace(r.name)
		b.ReportMetric(r.rate, m+"-msgs/s")
		b.ReportMetric(r.allocsPer, m+"-allocs/msg")
		record(b, Record{Chart: "throughput", Backend: "mariadb", Series: r.name, Unit: "msgs/s", Values: r.rates})
	}
	// Each paired contender's ratio to its raw loop round by round (the rounds interleave the
	// contenders, so a round's ratio compares drains made moments apart), and their median.
	byName := map[string]myResult{}
	for _, r := range rs {
		byName[r.name] = r
	}
	for _, r := range rs {
		raw, ok := byName[pairs[r.name]]
		if !ok || len(raw.rates) != len(r.rates) {
			continue
		}
		var ratios []float64
		for i := range r.rates {
			ratios = append(ratios, r.rates[i]/raw.rates[i])
		}
		var per []string
		for _, x := range ratios {
			per = append(per, fmt.Sprintf("%.3f", x))
		}
		slices.Sort(ratios)
		fmt.Fprintf(&sb, "per-round ÷raw %s: median %.3f [%s]\n", r.name, ratios[len(ratios)/2], strings.Join(per, " "))
	}
	b.Log(sb.String())
}

// BenchmarkMariaDBRaw drains the queue with the raw loops alone, to find the ceiling per form
// and worker count on this machine.
func BenchmarkMariaDBRaw(b *testing.B) {
	for range b.N {
		rs := runMyContenders(b, []myContender{
			myRaw("raw rowlock (w=4,B=100)", myRawRowLock, 4, 100),
			myRaw("raw rowlock (w=16,B=100)", myRawRowLock, 16, 100),
			myRaw("raw rowlock grouped (w=4,B=100)", myRawRowLockGrouped, 4, 100),
			myRaw("raw rowlock LIMIT 1 (w=4)", myRawRowLock, 4, 1),
			myRaw("raw lease (w=4,B=100)", myRawLease, 4, 100),
		})
		reportMy(b, rs, nil)
	}
}

// myAdmin opens an administrative pool on the server of myURL and pings it; it returns the
// parsed DSN too (for the databases a benchmark creates), nil on a DSN that does not parse.
func myAdmin(ctx context.Context) (*sql.DB, *gomysql.Config, error) {
	cfg, err := gomysql.ParseDSN(myURL())
	if err != nil {
		return nil, nil, err
	}
	admin, err := sql.Open("mysql", myURL())
	if err == nil {
		if err = admin.PingContext(ctx); err != nil {
			_ = admin.Close()
		}
	}
	return admin, cfg, err
}

// myAdminOrSkip is myAdmin for a benchmark: it skips (or fails, under SETTLE_REQUIRE_SERVERS)
// with the reason when the server does not answer.
func myAdminOrSkip(ctx context.Context, b *testing.B) (*sql.DB, *gomysql.Config) {
	b.Helper()
	admin, cfg, err := myAdmin(ctx)
	switch {
	case cfg == nil:
		b.Fatal(err)
	case err != nil:
		coretest.ServerUnavailable(b, "MariaDB", cfg.Addr, err)
	}
	return admin, cfg
}
