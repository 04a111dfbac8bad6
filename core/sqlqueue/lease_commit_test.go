package sqlqueue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// commitFailDB is memDB whose commit number failAt fails.
type commitFailDB struct {
	memDB
	commits atomic.Int64
	failAt  int64
}

var errCommit = errors.New("commit refused")

func (m *commitFailDB) Begin(context.Context) (Transaction, error) {
	return commitFailTx{memTx{&m.memDB}, m}, nil
}

// commitFailTx is memTx whose Commit counts the DB's commits.
type commitFailTx struct {
	memTx
	db *commitFailDB
}

func (tx commitFailTx) Commit(context.Context) error {
	if tx.db.commits.Add(1) == tx.db.failAt {
		return errCommit
	}
	return nil
}

// TestClaimCommitFails: a claim cycle whose commit fails hands none of the rows it claimed out,
// and reports the settlements that went with it as failed; the claims go on after it, and the
// settlements of a cycle that commits reach core with no error.
func TestClaimCommitFails(t *testing.T) {
	const batch = 128
	db := &commitFailDB{failAt: 2} // the first settle-and-claim
	db.n.Store(3 * batch)
	ep, err := NewLease(memDialect{}, db, overheadTable(), "q")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	handled := map[string]int{}
	ss := drainMem(t, ep, 2*batch, func(ctx context.Context, m *core.Message[[]byte]) error {
		mu.Lock()
		handled[m.ID()]++
		mu.Unlock()
		return nil
	}, BatchSize(batch), FlushLimits(batch, time.Hour))
	failed, ok := 0, 0
	for _, s := range ss {
		id, _ := strconv.Atoi(s.Delivery.ID())
		switch {
		case s.Err != nil:
			failed++
			if !errors.Is(s.Err, errCommit) || id > batch {
				t.Errorf("settlement of %s failed with %v; want only the first claim's, with the commit's error", s.Delivery.ID(), s.Err)
			}
		default:
			ok++
			if id <= 2*batch {
				t.Errorf("settlement of %s succeeded; want only the third claim's", s.Delivery.ID())
			}
		}
	}
	if failed != batch || ok != batch {
		t.Errorf("%d failed and %d settled; want %d each", failed, ok, batch)
	}
	mu.Lock()
	defer mu.Unlock()
	for id := batch + 1; id <= 2*batch; id++ {
		if n := handled[strconv.Itoa(id)]; n != 0 {
			t.Errorf("row %d of the claim whose commit failed was handled %d times; want none", id, n)
		}
	}
	if len(handled) != 2*batch {
		t.Errorf("%d rows handled; want %d (the first and the third claim)", len(handled), 2*batch)
	}
}

// TestClaimsReportInOrder: with one worker, core hears of the settlements of a drain's claims
// in the order they were made.
func TestClaimsReportInOrder(t *testing.T) {
	const batch, claims = 128, 8
	db := &memDB{}
	db.n.Store(batch * claims)
	ep, err := NewLease(memDialect{}, db, overheadTable(), "q")
	if err != nil {
		t.Fatal(err)
	}
	ss := drainMem(t, ep, batch*claims, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		BatchSize(batch), FlushLimits(batch, time.Hour))
	for i, s := range ss {
		if s.Err != nil || s.Delivery.ID() != strconv.Itoa(i+1) {
			t.Fatalf("settlement %d: %s (error %v); want row %d settled, the rows in order", i, s.Delivery.ID(), s.Err, i+1)
		}
	}
}

// drainMem runs handler on ep (an in-memory database's queue) in a coretest.Harness on the real
// clock until n settlements, stops the App and returns the settlements.
func drainMem(t *testing.T, ep core.Endpoint, n int, handler core.Handler[[]byte], opts ...core.Option) []core.Settlement {
	t.Helper()
	h := coretest.New(t, core.WithClock(clock.Real()))
	if err := core.Subscribe(h.App, ep, handler, append([]core.Option{core.WithCodec(core.Raw)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	h.Start()
	ss := h.WaitSettled(n)
	h.Stop()
	return ss
}
