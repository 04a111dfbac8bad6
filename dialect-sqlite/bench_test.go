package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// The drain benchmark: b.N rows through the service (lease form, one worker, claims of 100,
// grouped settlement) and, for the same rows, a raw go-sqlite3 loop running the same
// statements in the same process: one UPDATE … RETURNING claim of 100 rows, one token-fenced
// DELETE per batch. The raw loop runs twice: with the claim and the DELETE in transactions of
// their own (raw, the reference) and with each DELETE in the next claim's transaction
// (raw-merged, the transactions the service runs). Each sub-benchmark reports the medians of
// the service's msgs/s, both loops' msgs/s and the paired ratios, and allocations per message
// (everything in the process while it drains: driver, database/sql, core and engine).
//
//	go test -run '^$' -bench Drain -benchtime 20000x ./dialect-sqlite
func BenchmarkDrain(b *testing.B) {
	for _, s := range []Sync{Full, Normal} {
		b.Run("sync="+string(s), func(b *testing.B) {
			// The machine may be shared and noisy: the two sides run back to back benchRounds
			// times, and the medians of the rates and of the paired ratios are reported. Only
			// the service's runs are timed.
			b.StopTimer()
			var raws, mergeds, svcs, ratios, mratios []float64
			var mallocs uint64
			rawAllocs := 0.0
			var ms runtime.MemStats
			for range benchRounds {
				r, a := drainRaw(b, s, b.N, false)
				m, _ := drainRaw(b, s, b.N, true)
				rawAllocs = a
				db, table := benchDB(b, s, b.N)
				runtime.ReadMemStats(&ms)
				before := ms.Mallocs
				b.StartTimer()
				start := time.Now()
				drainService(b, db, table, b.N)
				el := time.Since(start)
				b.StopTimer()
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				svc := float64(b.N) / el.Seconds()
				raws, svcs, ratios = append(raws, r), append(svcs, svc), append(ratios, svc/r)
				mergeds, mratios = append(mergeds, m), append(mratios, svc/m)
			}
			b.ReportMetric(median(svcs), "msgs/s")
			b.ReportMetric(median(raws), "raw-msgs/s")
			b.ReportMetric(median(ratios), "ratio")
			b.ReportMetric(median(mergeds), "raw-merged-msgs/s")
			b.ReportMetric(median(mratios), "ratio-merged")
			b.ReportMetric(float64(mallocs)/float64(benchRounds*b.N), "allocs/msg")
			b.ReportMetric(rawAllocs, "raw-allocs/msg")
		})
	}
}

const benchBatch = 100

// benchRounds is how many times each side drains.
const benchRounds = 5

func benchTable() sqlqueue.Table {
	t := sqlqueue.StandardTable("q")
	t.Columns.ProcessedAt = "" // ack deletes
	return t
}

// benchDB returns a fresh database holding n ready rows.
func benchDB(b *testing.B, s Sync, n int) (*DB, sqlqueue.Table) {
	b.Helper()
	db, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Synchronous(s))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	t := benchTable()
	ctx := context.Background()
	if err := db.CreateTable(ctx, t); err != nil {
		b.Fatal(err)
	}
	tx, err := db.Pool().Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO "q" ("payload", "grp", "attempt", "created_at") VALUES (?, 'q', 0, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"card":"4242","cents":100}`)
	now := db.Dialect().Time(time.Now())
	for range n {
		if _, err := ins.Exec(payload, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return db, t
}

// drainService runs an App until n rows are settled.
func drainService(b *testing.B, db *DB, t sqlqueue.Table, n int) {
	var settled atomic.Int64
	done := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(discard()), core.WithObserver(func(s core.Settlement) {
		if s.Err != nil {
			b.Errorf("settlement failed: %v", s.Err)
		}
		if settled.Add(1) == int64(n) {
			close(done)
		}
	}))
	ep, err := Lease(db, t, "q")
	if err != nil {
		b.Fatal(err)
	}
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		core.WithCodec(core.Raw), sqlqueue.BatchSize(benchBatch)); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("App.Run ended early: %v", err)
	}
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

// drainRaw drains n rows of a fresh database with the engine's statements, written out, on
// database/sql directly; it returns msgs/s and allocations per message. Separate runs each
// claim and each batch's fenced DELETE in a transaction of its own (the reference
// loop); merged runs a batch's DELETE in the transaction of the next claim, as the service's
// lease form does.
func drainRaw(b *testing.B, s Sync, n int, merged bool) (float64, float64) {
	db, _ := benchDB(b, s, n)
	sdb := db.Pool()
	ctx := context.Background()
	lease := 30 * time.Second
	claim := `UPDATE "q" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "q" WHERE "grp" = ? AND ` +
		`("retry_after" IS NULL OR "retry_after" <= ?) AND ("locked_until" IS NULL OR "locked_until" <= ?) ORDER BY "id" LIMIT ?) ` +
		`RETURNING "id", "payload", "attempt", "headers"`
	del := map[int]string{}
	deleteSQL := func(k int) string {
		if q, ok := del[k]; ok {
			return q
		}
		q := `DELETE FROM "q" WHERE "locked_until" = ? AND "id" IN (` + strings.TrimSuffix(strings.Repeat("?, ", k), ", ") + `)`
		del[k] = q
		return q
	}
	settle := func(tx *sql.Tx, args []any) {
		k := len(args) - 1
		r, err := tx.ExecContext(ctx, deleteSQL(k), args...)
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := r.RowsAffected(); got != int64(k) {
			b.Fatalf("raw loop: deleted %d of %d", got, k)
		}
	}
	begin := func() *sql.Tx {
		tx, err := sdb.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		return tx
	}
	commit := func(tx *sql.Tx) {
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	start := time.Now()
	left := n
	args := make([]any, 0, benchBatch+1)
	var pending []any // merged: the previous batch, settled with the next claim
	for left > 0 {
		now := time.Now().UTC()
		tok := (newDialect(nil)).Time(now.Add(lease))
		nowS := (newDialect(nil)).Time(now)
		tx := begin()
		if len(pending) > 0 {
			settle(tx, pending)
			pending = pending[:0]
		}
		rows, err := tx.QueryContext(ctx, claim, tok, "q", nowS, nowS, benchBatch)
		if err != nil {
			b.Fatal(err)
		}
		args = append(args[:0], tok)
		for rows.Next() {
			var id, att int64
			var payload, headers []byte
			if err := rows.Scan(&id, &payload, &att, &headers); err != nil {
				b.Fatal(err)
			}
			args = append(args, id)
		}
		rows.Close()
		commit(tx)
		k := len(args) - 1
		if k == 0 {
			b.Fatalf("raw loop: no rows left with %d to go", left)
		}
		if merged {
			pending = append(pending[:0], args...)
		} else {
			tx = begin()
			settle(tx, args)
			commit(tx)
		}
		left -= k
	}
	if len(pending) > 0 {
		tx := begin()
		settle(tx, pending)
		commit(tx)
	}
	el := time.Since(start)
	runtime.ReadMemStats(&ms)
	return float64(n) / el.Seconds(), float64(ms.Mallocs-before) / float64(n)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
