package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgTrace counts, with SETTLE_BENCH_PG_TRACE=1, the statements each contender's pool sends and
// the time they take from being sent to their last row read (pgx's QueryTracer), so that settle
// and a raw loop can be compared statement by statement: what is not in a statement is the
// client's own time between them.
type pgTrace struct {
	stmts tally
}

type pgTraceKey struct{}

type pgTraceStart struct {
	sql string
	at  time.Time
}

func newPGTrace() *pgTrace {
	if os.Getenv("SETTLE_BENCH_PG_TRACE") == "" {
		return nil
	}
	return &pgTrace{}
}

func (t *pgTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, pgTraceKey{}, pgTraceStart{sql: d.SQL, at: time.Now()})
}

func (t *pgTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.end(ctx)
}

// A batch (one round trip) is traced as one statement, its statements joined by " | ".
func (t *pgTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, short(q.SQL, 40))
	}
	return context.WithValue(ctx, pgTraceKey{}, pgTraceStart{sql: "batch: " + strings.Join(sqls, " | "), at: time.Now()})
}

func (t *pgTrace) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *pgTrace) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.end(ctx)
}

func short(sql string, n int) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > n {
		sql = sql[:n] + "…"
	}
	return sql
}

func (t *pgTrace) end(ctx context.Context) {
	s, ok := ctx.Value(pgTraceKey{}).(pgTraceStart)
	if !ok {
		return
	}
	t.stmts.add(short(s.sql, 100), time.Since(s.at))
}

// report prints the statements of one drain of n rows that took wall.
func (t *pgTrace) report(name string, n int, wall time.Duration) {
	stats, total := t.stmts.sorted(func(a, b tallyStat) bool { return a.took > b.took })
	var sb strings.Builder
	fmt.Fprintf(&sb, "trace %s: %d rows in %v; in statements %v (%.1f µs/row), outside %.1f µs/row\n",
		name, n, wall.Round(time.Millisecond), total.Round(time.Millisecond),
		float64(total.Microseconds())/float64(n), float64((wall-total).Microseconds())/float64(n))
	for _, st := range stats {
		fmt.Fprintf(&sb, "  %7d × %7.1f µs  %s\n", st.n, float64(st.took.Microseconds())/float64(st.n), st.key)
	}
	fmt.Print(sb.String())
}
