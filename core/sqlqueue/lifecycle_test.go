package sqlqueue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
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
