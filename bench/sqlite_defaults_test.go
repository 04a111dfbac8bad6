//go:build cgo

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

// BenchmarkSQLiteDefaults drains a SQLite queue (dialect-sqlite, synchronous=FULL, the lease
// form, ack deleting the row, one worker) four ways in interleaved rounds: the raw loop running
// the engine's statements by hand with claims of 100 rows and with claims of
// sqlqueue.DefaultMaxBatch rows (the size the default claims grow to on a backlog), settle with
// no option at all, and settle with BatchSize(100). It reports each one's median with its range
// and the ratio of each settle configuration to the raw loop at its claim size, round by round
// (defaults ÷ raw at DefaultMaxBatch; BatchSize(100) ÷ raw at 100), and the defaults ÷ the raw
// loop at 100.
//
//	go test -run '^$' -bench 'BenchmarkSQLiteDefaults$' -benchtime 1x ./bench
//
// SETTLE_BENCH_SQLITE_N rows per drain (default 50000), SETTLE_BENCH_SQLITE_ROUNDS rounds
// (default 5).
func BenchmarkSQLiteDefaults(b *testing.B) {
	n := envInt(b, "SETTLE_BENCH_SQLITE_N", 50000)
	rounds := envInt(b, "SETTLE_BENCH_SQLITE_ROUNDS", 5)
	maxB := sqlqueue.DefaultMaxBatch
	names := []string{
		"raw lease (B=100)",
		fmt.Sprintf("raw lease (B=%d)", maxB),
		"settle lease, defaults",
		"settle lease, BatchSize(100)",
	}
	// ref[c] is the raw contender settle contender c is measured against: the same claim size.
	ref := map[int]int{2: 1, 3: 0}
	rates := make([][]float64, len(names))
	for r := range rounds {
		for _, c := range roundOrder(r, len(names)) {
			var rate float64
			switch c {
			case 0:
				rate = rawSQLiteLease(b, n, 100)
			case 1:
				rate = rawSQLiteLease(b, n, maxB)
			case 2:
				rate, _ = drainSQLite(b, cgoSQLite{}, n, 1, false)
			case 3:
				rate, _ = drainSQLiteOpts(b, cgoSQLite{}, n, 1, false, sqlqueue.BatchSize(100))
			}
			rates[c] = append(rates[c], rate)
		}
	}
	ratios := func(c, raw int) []float64 {
		rs := make([]float64, rounds)
		for i := range rs {
			rs[i] = rates[c][i] / rates[raw][i]
		}
		return rs
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\nSQLite defaults, N=%d, %d interleaved rounds\n\n| contender | msgs/s (min–max) | ÷raw at the same claim size (min–max) |\n| --- | ---: | ---: |\n", n, rounds)
	for c, name := range names {
		ratio := "—"
		if raw, ok := ref[c]; ok {
			rs := ratios(c, raw)
			ratio = fmt.Sprintf("%.2f (%.2f–%.2f) ÷ %s", med(rs), slices.Min(rs), slices.Max(rs), names[raw])
			b.ReportMetric(med(rs), fmt.Sprintf("ratio%d", c))
		}
		fmt.Fprintf(&out, "| %s | %s | %s |\n", name, spread(rates[c]), ratio)
		record(b, Record{Chart: "throughput", Backend: "sqlite", Series: name, Unit: "msgs/s", Values: rates[c]})
	}
	rs := ratios(2, 0)
	fmt.Fprintf(&out, "\nsettle lease, defaults ÷ %s: %.2f (%.2f–%.2f)\n", names[0], med(rs), slices.Min(rs), slices.Max(rs))
	b.Log(out.String())
}

// rawSQLiteLease seeds a fresh file as drainSQLite does and drains it by hand with the
// statements dialect-sqlite's lease form sends, one worker, claims of batch rows: each
// transaction (BEGIN IMMEDIATE, as the dialect's pool begins) deletes the previous claim's rows
// fenced by its token and claims the next batch with UPDATE … RETURNING, then commits.
func rawSQLiteLease(b *testing.B, n, batch int) float64 {
	b.Helper()
	ctx := context.Background()
	db, err := cgoSQLite{}.open(ctx, filepath.Join(b.TempDir(), "bench.db"), false)
	if err != nil {
		b.Fatal(err)
	}
	defer db.pool.Close()
	return rawSQLiteLeaseOn(b, db, n, batch, func() {})
}

// rawSQLiteLeaseOn is rawSQLiteLease on db; seeded runs between the seeding and the drain.
func rawSQLiteLeaseOn(b *testing.B, db sqliteBenchDB, n, batch int, seeded func()) float64 {
	ctx := context.Background()
	t := sqlqueue.StandardTable("q")
	t.Columns.ProcessedAt = ""
	if err := db.create(ctx, t); err != nil {
		b.Fatal(err)
	}
	seedSQLite(b, db, n)
	seeded()
	const claim = `UPDATE "q" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "q" WHERE "grp" = 'q' AND ("retry_after" IS NULL OR "retry_after" <= ?) AND "locked_until" IS NULL ORDER BY "id" LIMIT ?) RETURNING "id", "payload", "attempt", "headers", "created_at"`
	var prev []any // token, then ids
	done := 0
	start := time.Now()
	for {
		tx, err := db.pool.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(prev) > 1 {
			q := `DELETE FROM "q" WHERE "locked_until" = ? AND "id" IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(prev)-1), ", ") + ")"
			if _, err := tx.ExecContext(ctx, q, prev...); err != nil {
				b.Fatal(err)
			}
			done += len(prev) - 1
		}
		now := time.Now()
		token := db.dialect.Time(now.Add(sqlqueue.DefaultLease))
		rows, err := tx.QueryContext(ctx, claim, token, db.dialect.Time(now), batch)
		if err != nil {
			b.Fatal(err)
		}
		next := []any{token}
		for rows.Next() {
			var id, attempt int64
			var payload []byte
			var headers, created any
			if err := rows.Scan(&id, &payload, &attempt, &headers, &created); err != nil {
				b.Fatal(err)
			}
			next = append(next, id)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		prev = next
		if len(next) == 1 {
			break
		}
	}
	if done != n {
		b.Fatalf("raw loop settled %d of %d rows", done, n)
	}
	return float64(n) / time.Since(start).Seconds()
}
