package sqlqueue

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// hangDB claims rows from memory, and every other statement hangs until its context ends: a
// server that stopped answering.
type hangDB struct{ memDB }

func (h *hangDB) Exec(ctx context.Context, _ string, _ ...any) (Result, error) {
	<-ctx.Done()
	return Result{}, ctx.Err()
}
func (h *hangDB) Begin(context.Context) (Transaction, error) { return hangTx{h}, nil }

type hangTx struct{ *hangDB }

func (hangTx) Commit(context.Context) error   { return nil }
func (hangTx) Rollback(context.Context) error { return nil }
func (hangTx) Unwrap() any                    { return nil }

// TestStatementsHaveDeadlines: a settlement whose statement never returns fails at the
// statement timeout, and the App stops: nothing the engine runs on its own behalf can block a
// subscription's close forever. (Grouped flushes and row-lock settlements ran on a context
// without a deadline.)
func TestStatementsHaveDeadlines(t *testing.T) {
	for _, f := range []Form{FormLease, FormRowLock} {
		t.Run(f.String(), func(t *testing.T) {
			t.Parallel()
			db := &hangDB{}
			db.n.Store(1)
			var ep core.Endpoint
			var err error
			if f == FormLease {
				ep, err = NewLease(memDialect{}, db, overheadTable(), "q")
			} else {
				ep, err = NewRowLock(memDialect{}, db, overheadTable(), "q")
			}
			if err != nil {
				t.Fatal(err)
			}
			rec := coretest.NewRecorder(t)
			app := core.New(core.WithoutSignals(), core.WithLogger(discardLogger()), core.WithObserver(rec.Observe),
				core.WithShutdownTimeout(time.Minute))
			if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
				core.WithCodec(core.Raw), StatementTimeout(100*time.Millisecond), FlushLimits(1, 0)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- app.Run(ctx) }()
			s := rec.WaitSettled(1)
			if !errors.Is(s[0].Err, context.DeadlineExceeded) {
				t.Errorf("settlement error = %v; want the statement's deadline", s[0].Err)
			}
			cancel()
			select {
			case err := <-ran:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(coretest.WaitTimeout):
				t.Fatal("the App did not stop: a statement without a deadline holds its close")
			}
		})
	}
}

var errFakeLost = errors.New("fake: connection refused")

// downDB is a memDB whose server is down for its first `down` transactions.
type downDB struct {
	memDB
	down atomic.Int32
}

func (d *downDB) Begin(ctx context.Context) (Transaction, error) {
	if d.down.Add(-1) >= 0 {
		return nil, errFakeLost
	}
	return d.memDB.Begin(ctx)
}

type lossDialect struct{ memDialect }

func (lossDialect) ConnLost(err error) bool { return errors.Is(err, errFakeLost) }

// TestLostConnectionDoesNotBackOff: while the server does not answer, a claimant waits a short
// backoff of its own (at most ReconnectMax) instead of failing Next, whose backoff in core
// climbs to seconds during a restart and delays the first claim after it; the outage is
// reported once, and so is the reconnection.
func TestLostConnectionDoesNotBackOff(t *testing.T) {
	db := &downDB{}
	db.n.Store(1)
	db.down.Store(6)
	ep, err := NewLease(lossDialect{}, db, overheadTable(), "q")
	if err != nil {
		t.Fatal(err)
	}
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	logs := &coretest.Logs{}
	rec := coretest.NewRecorder(t)
	var mu sync.Mutex
	var events []core.EventKind
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)), core.WithObserver(rec.Observe), core.WithClock(vc),
		core.WithEventObserver(func(e core.Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }))
	if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[[]byte]) error { return nil },
		core.WithCodec(core.Raw), FlushLimits(1, 0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	waited := time.Duration(0)
	for db.down.Load() >= 0 {
		// The extension timer and the claimant's reconnect wait.
		if err := vc.BlockUntil(ctx, 2); err != nil {
			t.Fatal(err)
		}
		vc.Advance(ReconnectMax)
		waited += ReconnectMax
	}
	rec.WaitSettled(1)
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Find("settle: taking the next delivery failed; trying again")); n != 0 {
		t.Errorf("core backed off %d times for a lost connection", n)
	}
	if n := len(logs.Find("sqlqueue: the database connection is lost; claiming again as soon as the server answers")); n != 1 {
		t.Errorf("the outage was logged %d times; want once", n)
	}
	if n := len(logs.Find("sqlqueue: the database answers again; claiming")); n != 1 {
		t.Errorf("the reconnection was logged %d times; want once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(events, []core.EventKind{core.EventSourceFailed, core.EventReconnected}) {
		t.Errorf("events = %v; want source_failed then reconnected", events)
	}
}
