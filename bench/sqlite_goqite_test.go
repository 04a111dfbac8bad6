//go:build cgo

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sqlite "github.com/settlehq/settle/dialect-sqlite"
	"maragu.dev/goqite"
)

// BenchmarkSQLitePeers drains a SQLite queue file with one consumer each way, in interleaved
// rounds in one process: the raw lease loop (rawSQLiteLease: the engine's statements by hand,
// claims of 100 rows), settle with no option at all (drainSQLite with one worker: dialect-sqlite,
// the lease form, ack deleting the row, the default claim size), and goqite v0.4.0
// (maragu.dev/goqite), a peer queue on SQLite.
//
// goqite v0.4.0 has no batched receive: Receive claims one message per call (one UPDATE …
// RETURNING … LIMIT 1). The fastest way its API allows is its transaction variants in the
// caller's own transaction, so "goqite batched" runs ReceiveTx and DeleteTx for up to 100
// messages in one transaction and commits once per 100 (the handler's work would run inside that
// write transaction). "goqite one at a time" runs Receive then Delete, each in its own
// transaction as goqite runs them (two commits per message), on a tenth of the rows (at least
// 100), since it runs at a few hundred messages per second with synchronous=FULL.
//
// Every contender runs on a fresh file opened by sqlite.Open with synchronous=FULL: goqite gets
// that pool (db.Pool()), so it runs with the same WAL journal, synchronous=FULL, busy timeout,
// BEGIN IMMEDIATE transactions and pool size as settle. goqite's table is its own
// (schema_sqlite.sql of the module, read from the module cache as goqite's README reads it):
// a random text id, text timestamps, a trigger that stamps "updated" after every update (so each
// receive writes the row twice), an index on (queue, priority desc, created).
//
//	go test -run '^$' -bench 'BenchmarkSQLitePeers$' -benchtime 1x ./bench
//
// SETTLE_BENCH_SQLITE_N rows per drain (default 20000), SETTLE_BENCH_SQLITE_ROUNDS rounds
// (default 5).
func BenchmarkSQLitePeers(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 20000)
	rounds := envInt(b, "SETTLE_BENCH_SQLITE_ROUNDS", 5)
	schema := goqiteSchema(b)
	one := max(n/10, 100)
	names := []string{"raw lease (B=100)", "settle lease, defaults", "goqite batched (100 per tx)", fmt.Sprintf("goqite one at a time (N=%d)", one)}
	rates := make([][]float64, len(names))
	for range b.N {
		for r := range rounds {
			for _, c := range roundOrder(r, len(names)) {
				var rate float64
				switch c {
				case 0:
					rate = rawSQLiteLease(b, n, 100)
				case 1:
					rate, _ = drainSQLite(b, cgoSQLite{}, n, 1, false)
				case 2:
					rate = goqiteDrain(b, schema, n, 100)
				case 3:
					rate = goqiteDrain(b, schema, one, 1)
				}
				rates[c] = append(rates[c], rate)
			}
		}
	}
	ratios := func(c, base int) []float64 {
		rs := make([]float64, len(rates[c]))
		for i := range rs {
			rs[i] = rates[c][i] / rates[base][i]
		}
		return rs
	}
	show := func(rs []float64) string {
		return fmt.Sprintf("%.2f (%.2f–%.2f)", med(rs), slices.Min(rs), slices.Max(rs))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var out strings.Builder
	fmt.Fprintf(&out, "\nSQLite peers, N=%d, %d interleaved rounds, load average %s\n", n, len(rates[0]), strings.TrimSpace(string(load)))
	fmt.Fprintf(&out, "| contender | msgs/s (min–max) | ÷raw (min–max) | ÷goqite batched (min–max) |\n| --- | ---: | ---: | ---: |\n")
	for c, name := range names {
		byRaw, byGoqite := "—", "—"
		if c != 0 {
			byRaw = show(ratios(c, 0))
		}
		if c != 2 {
			byGoqite = show(ratios(c, 2))
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s |\n", name, spread(rates[c]), byRaw, byGoqite)
		b.ReportMetric(med(rates[c]), metricName(name)+"-msgs/s")
		record(b, Record{Chart: "throughput", Backend: "sqlite", Series: name, Unit: "msgs/s", Values: rates[c]})
	}
	b.ReportMetric(med(ratios(1, 2)), "settle÷goqite")
	fmt.Print(out.String())
}

// goqiteSchema reads schema_sqlite.sql from the goqite module in the module cache (the version
// go.mod requires), as goqite's README has a service read it.
func goqiteSchema(b *testing.B) string {
	b.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "maragu.dev/goqite").Output()
	if err != nil {
		b.Fatalf("locating maragu.dev/goqite: %v", err)
	}
	schema, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "schema_sqlite.sql"))
	if err != nil {
		b.Fatal(err)
	}
	return string(schema)
}

// goqiteDrain creates goqite's table in a fresh file opened by sqlite.Open (synchronous=FULL),
// sends n messages in one transaction (not timed), then times draining them: batch 1 runs
// Receive and Delete (a transaction each); a larger batch runs ReceiveTx and DeleteTx for up
// to batch messages per transaction. It returns msgs/s.
func goqiteDrain(b *testing.B, schema string, n, batch int) float64 {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Synchronous(sqlite.Full))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	pool := db.Pool()
	if _, err := pool.ExecContext(ctx, schema); err != nil {
		b.Fatal(err)
	}
	q := goqite.New(goqite.NewOpts{DB: pool, Name: "q"})
	payload := []byte(`{"card":"4242","cents":100}`)
	inTx(b, pool, func(tx *sql.Tx) error {
		for range n {
			if err := q.SendTx(ctx, tx, goqite.Message{Body: payload}); err != nil {
				return err
			}
		}
		return nil
	})

	done := 0
	start := time.Now()
	if batch == 1 {
		for {
			m, err := q.Receive(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if m == nil {
				break
			}
			if err := q.Delete(ctx, m.ID); err != nil {
				b.Fatal(err)
			}
			done++
		}
	} else {
		for got := -1; got != 0; {
			got = 0
			inTx(b, pool, func(tx *sql.Tx) error {
				for got < batch {
					m, err := q.ReceiveTx(ctx, tx)
					if err != nil || m == nil {
						return err
					}
					if err := q.DeleteTx(ctx, tx, m.ID); err != nil {
						return err
					}
					got++
				}
				return nil
			})
			done += got
		}
	}
	took := time.Since(start)
	if done != n {
		b.Fatalf("goqite drained %d of %d messages", done, n)
	}
	var left int
	if err := pool.QueryRowContext(ctx, `SELECT count(*) FROM goqite`).Scan(&left); err != nil || left != 0 {
		b.Fatalf("goqite: %d rows left (%v)", left, err)
	}
	return float64(n) / took.Seconds()
}

// inTx runs f in a transaction of pool and commits it.
func inTx(b *testing.B, pool *sql.DB, f func(*sql.Tx) error) {
	b.Helper()
	tx, err := pool.Begin()
	if err != nil {
		b.Fatal(err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
