package sqlqueue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// lockDB is a row-lock queue table in memory: claims lock the oldest free rows, deletes apply
// at commit, and the commit of a claim that deleted the poison row fails (as a deferred
// constraint or trigger would), rolling the whole claim back.
type lockDB struct {
	mu     sync.Mutex
	rows   []int64 // ids still in the table, in order
	locked map[int64]*lockTx
	poison int64
	claims [][]int64 // the ids each claim took
}

type lockTx struct {
	db      *lockDB
	deletes []int64
}

func (db *lockDB) Exec(context.Context, string, ...any) (Result, error) {
	return Result{}, errors.New("lockDB: no statement outside a claim")
}
func (db *lockDB) Query(context.Context, string, ...any) (Rows, error) {
	return nil, errors.New("lockDB: no query outside a claim")
}
func (db *lockDB) Begin(context.Context) (Transaction, error) { return &lockTx{db: db}, nil }
func (db *lockDB) Conn(context.Context) (Conn, error)         { return nil, errors.New("lockDB: no conns") }

func (tx *lockTx) Query(_ context.Context, sql string, args ...any) (Rows, error) {
	db := tx.db
	db.mu.Lock()
	defer db.mu.Unlock()
	limit := int(args[len(args)-1].(int64))
	var got []int64
	for _, id := range db.rows {
		if len(got) == limit {
			break
		}
		if db.locked[id] == nil {
			db.locked[id] = tx
			got = append(got, id)
		}
	}
	db.claims = append(db.claims, got)
	return &idRows{ids: got}, nil
}

func (tx *lockTx) Exec(_ context.Context, sql string, args ...any) (Result, error) {
	if !strings.HasPrefix(sql, "DELETE") {
		return Result{}, errors.New("lockDB: unexpected statement " + sql)
	}
	tx.deletes = append(tx.deletes, args[0].(int64))
	return Result{RowsAffected: 1}, nil
}

func (tx *lockTx) Commit(context.Context) error {
	db := tx.db
	db.mu.Lock()
	defer db.mu.Unlock()
	defer tx.unlock()
	if slices.Contains(tx.deletes, db.poison) {
		return errors.New("lockDB: the commit of the poison row's delete fails")
	}
	db.rows = slices.DeleteFunc(db.rows, func(id int64) bool { return slices.Contains(tx.deletes, id) })
	return nil
}

func (tx *lockTx) Rollback(context.Context) error {
	tx.db.mu.Lock()
	defer tx.db.mu.Unlock()
	tx.unlock()
	return nil
}

func (tx *lockTx) unlock() {
	for id, o := range tx.db.locked {
		if o == tx {
			delete(tx.db.locked, id)
		}
	}
}

func (tx *lockTx) Unwrap() any { return nil }

type idRows struct {
	ids []int64
	at  int
}

func (r *idRows) Next() bool { r.at++; return r.at <= len(r.ids) }
func (r *idRows) Scan(dest ...any) error {
	*dest[0].(*int64) = r.ids[r.at-1]
	*dest[1].(*[]byte) = []byte(`{}`)
	*dest[2].(*int64) = 1
	return nil
}
func (r *idRows) Err() error   { return nil }
func (r *idRows) Close() error { return nil }

type lockDialect struct{ pgLike }

func (lockDialect) Columns(context.Context, Queryer, TableRef) ([]ColumnInfo, error) {
	return []ColumnInfo{{Name: "id"}, {Name: "payload"}}, nil
}

// TestRowLockClaimShrinks: a claim whose commit keeps failing (one poison row among its rows)
// halves the next claim, down to the poison row alone, which is then held back, so every other
// row settles. With a fixed batch the poison row took the whole batch down on every claim and
// nothing ever settled.
func TestRowLockClaimShrinks(t *testing.T) {
	db := &lockDB{locked: map[int64]*lockTx{}, poison: 3}
	for id := range int64(12) {
		db.rows = append(db.rows, id+1)
	}
	ep, err := NewRowLock(lockDialect{}, db, Table{Name: "jobs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	settled := map[string]int{}
	others := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(discardLogger()), core.WithClock(vc),
		core.WithObserver(func(s core.Settlement) {
			mu.Lock()
			defer mu.Unlock()
			if s.Err == nil {
				settled[s.Delivery.ID()]++
				if len(settled) == 11 {
					close(others)
				}
			}
		}))
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		core.WithCodec(core.Raw), BatchSize(8)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-others:
	case <-time.After(10 * time.Second):
		db.mu.Lock()
		claims := slices.Clone(db.claims)
		db.mu.Unlock()
		t.Fatalf("the rows around the poison row did not settle; claims: %v", claims)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if !slices.Equal(db.rows, []int64{db.poison}) {
		t.Errorf("rows left %v; want only the poison row", db.rows)
	}
	alone := false
	for _, c := range db.claims {
		alone = alone || slices.Equal(c, []int64{db.poison})
		if len(c) > 8 {
			t.Errorf("a claim took %d rows, more than the batch", len(c))
		}
	}
	if !alone {
		t.Errorf("the poison row was never claimed alone; claims: %v", db.claims)
	}
	if got := db.claims[0]; len(got) != 1 {
		t.Errorf("the first claim took %v; want one row (claims start small)", got)
	}
}

// TestRowLockPerMessageClaimsOneRow: with PerMessage the row-lock form claims one row per
// transaction, however fast the handlers are; the automatic claim size does not grow it.
func TestRowLockPerMessageClaimsOneRow(t *testing.T) {
	db := &lockDB{locked: map[int64]*lockTx{}, poison: -1}
	const n = 40
	for id := range int64(n) {
		db.rows = append(db.rows, id+1)
	}
	ep, err := NewRowLock(lockDialect{}, db, Table{Name: "jobs"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var settled atomic.Int64
	all := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(discardLogger()),
		core.WithObserver(func(s core.Settlement) {
			if s.Err != nil {
				t.Errorf("settlement of %s: %v", s.Delivery.ID(), s.Err)
			}
			if settled.Add(1) == n {
				close(all)
			}
		}))
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		core.WithCodec(core.Raw), PerMessage()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Errorf("%d of %d rows settled", settled.Load(), n)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, c := range db.claims {
		if len(c) > 1 {
			t.Fatalf("a claim took %d rows with PerMessage: %v", len(c), c)
		}
	}
	if len(db.rows) != 0 {
		t.Errorf("rows left: %v", db.rows)
	}
}
