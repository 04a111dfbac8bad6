package sqlqueue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

// pipeDB is memDB with a Pipeliner whose refuse-th call fails with ErrRowCount without running
// anything, as a pipeline rolled back by a lost lease does.
type pipeDB struct {
	memDB
	calls, refuse atomic.Int64
}

func (p *pipeDB) Pipeline(ctx context.Context, steps []Step) error {
	if p.calls.Add(1) == p.refuse.Load() {
		return fmt.Errorf("%w (refused by the test)", ErrRowCount)
	}
	for _, s := range steps {
		if s.Rows != nil {
			rows, err := p.Query(ctx, s.SQL, s.Args...)
			if err != nil {
				return err
			}
			if err := s.Rows(rows); err != nil {
				return err
			}
			continue
		}
		r, err := p.Exec(ctx, s.SQL, s.Args...)
		if err != nil {
			return err
		}
		if s.Want > 0 && r.RowsAffected != s.Want {
			return ErrRowCount
		}
	}
	return nil
}

// The lease form settles and claims through a Pipeliner; when a pipeline is refused for a row
// count, the flush is settled on its own and the claim runs by itself: every row settles once,
// without an error.
func TestLeasePipelineFallsBack(t *testing.T) {
	const n = 1000
	db := &pipeDB{}
	db.n.Store(n)
	db.refuse.Store(3)
	ep, err := NewLease(memDialect{}, db, overheadTable(), "q")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(discardLogger()), core.WithObserver(func(s core.Settlement) {
		mu.Lock()
		defer mu.Unlock()
		if s.Err != nil {
			t.Errorf("message %s: %v", s.Delivery.ID(), s.Err)
		}
		seen[s.Delivery.ID()]++
		if len(seen) == n {
			close(done)
		}
	}))
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		core.WithCodec(core.Raw), BatchSize(100), core.Workers(4)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%d of %d settled", len(seen), n)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("message %s settled %d times", id, k)
		}
	}
	if db.calls.Load() < 5 {
		t.Errorf("%d pipelines for %d rows in claims of 100; want most cycles pipelined", db.calls.Load(), n)
	}
}
