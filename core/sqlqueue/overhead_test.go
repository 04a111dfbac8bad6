package sqlqueue

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/settlehq/settle/core"
)

// memDB is a database that answers the lease form's statements from memory: claims hand out
// numbered rows until n are gone, and every fenced statement matches. It measures what the
// engine and core add per message, without a database.
type memDB struct {
	next, n atomic.Int64
}

func (m *memDB) Exec(ctx context.Context, sql string, args ...any) (Result, error) {
	if len(args) == 1 { // a grouped row-lock settlement: the ids as one array
		if ids, ok := args[0].([]int64); ok {
			return Result{RowsAffected: int64(len(ids))}, nil
		}
	}
	if len(args) > 2 { // doneMany: token, then ids
		return Result{RowsAffected: int64(len(args) - 1)}, nil
	}
	return Result{RowsAffected: 1}, nil
}

func (m *memDB) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	if strings.Contains(sql, "IS NOT NULL AND") { // the lease form's rescue: no lapsed rows here
		return &memRows{}, nil
	}
	limit := args[len(args)-1].(int64)
	from := m.next.Add(limit) - limit
	to := min(from+limit, m.n.Load())
	return &memRows{at: from, to: to}, nil
}

func (m *memDB) Begin(context.Context) (Transaction, error) { return memTx{m}, nil }
func (m *memDB) Conn(context.Context) (Conn, error)         { panic("no conns") }

type memTx struct{ *memDB }

func (memTx) Commit(context.Context) error   { return nil }
func (memTx) Rollback(context.Context) error { return nil }
func (memTx) Unwrap() any                    { return nil }

type memRows struct{ at, to int64 }

var memPayload = []byte(`{"card":"4242"}`)

func (r *memRows) Next() bool { r.at++; return r.at <= r.to }
func (r *memRows) Scan(dest ...any) error {
	*dest[0].(*int64) = r.at
	*dest[1].(*[]byte) = memPayload
	*dest[2].(*int64) = 1
	return nil
}
func (r *memRows) Err() error   { return nil }
func (r *memRows) Close() error { return nil }

type memDialect struct{ pgLike }

func (memDialect) Columns(context.Context, Queryer, TableRef) ([]ColumnInfo, error) {
	var out []ColumnInfo
	for _, c := range overheadTable().ColumnList() {
		out = append(out, ColumnInfo{Name: c.Name})
	}
	return out, nil
}

// BenchmarkLeaseOverhead drains b.N rows of the in-memory database through the lease form:
// the cost of the engine and core per message, database excluded.
func BenchmarkLeaseOverhead(b *testing.B) {
	db := &memDB{}
	db.n.Store(int64(b.N))
	ep, err := NewLease(memDialect{}, db, overheadTable(), "q")
	if err != nil {
		b.Fatal(err)
	}
	drainOverhead(b, ep, BatchSize(100))
}

// drainOverhead runs a no-op subscription with opts on ep until b.N settlements, timing the
// drain.
func drainOverhead(b *testing.B, ep core.Endpoint, opts ...core.Option) {
	b.Helper()
	var settled atomic.Int64
	done := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(discardLogger()), core.WithObserver(func(s core.Settlement) {
		if settled.Add(1) == int64(b.N) {
			close(done)
		}
	}))
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		append([]core.Option{core.WithCodec(core.Raw)}, opts...)...); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { ran <- app.Run(ctx) }()
	<-done
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

// overheadTable deletes acknowledged rows, as the SQLite drain benchmark's table does.
func overheadTable() Table {
	t := StandardTable("q")
	t.Columns.ProcessedAt = ""
	return t
}

// memRowLock is memDialect with the row-lock form's claim, settling a claim's acks with one
// statement at its commit as dialect-postgres does.
type memRowLock struct{ memDialect }

func (memRowLock) GroupRowLockSettlements() bool { return true }
func (memRowLock) SettleByIDArray(qtable, id, mark string) string {
	return "DELETE FROM " + qtable + " WHERE " + id + " = ANY($1)"
}

// BenchmarkRowLockOverhead drains b.N rows of the in-memory database through the row-lock form
// with the defaults: the cost of the engine and core per message, database excluded.
func BenchmarkRowLockOverhead(b *testing.B) {
	db := &memDB{}
	db.n.Store(int64(b.N))
	ep, err := NewRowLock(memRowLock{}, db, overheadTable(), "q")
	if err != nil {
		b.Fatal(err)
	}
	drainOverhead(b, ep)
}
