package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Runtime is one opened subscription, as far as every form shares it: what it claims from (the
// queue, its schema as the subscription spells it, the dialect and database), how (its options,
// clock and logger), and the pieces every form uses, each a type with its own lock: the
// wake-ups, the rows held back after failed settlements, the statement deadlines. Its fields
// are set by Open and the form's start, and read only afterwards.
type Runtime struct {
	Q   *Queue
	S   *driver.Schema // the queue's, with the claim hints of Open (PinClaimIndex, OrderByGroup)
	D   driver.Dialect
	DB  driver.DB
	Cfg Config
	Sub core.Subscription
	Log *slog.Logger
	// Clock is the App's: every timestamp the engine writes comes from it.
	Clock clock.Clock
	// Form is the subscription's claim form, which custom events are told (EventInput.Form);
	// nothing in the engine branches on it.
	Form driver.Form
	// Table is the table's name, for errors and logs; Keys names it in advisory keys (canonical
	// after NameKeysCanonically).
	Table, Keys string
	// DLRef is the dead-letter table, in a table without a group column.
	DLRef driver.TableRef
	// RowLocks is the dialect's row-locking capability, nil without one; LockTx and LockSession
	// bound a transaction's and a dedicated connection's row-lock waits ("" without it).
	RowLocks            driver.RowLocking
	LockTx, LockSession string

	Wake  *Wake // the queue's wake-up, shared with the process's other claimants (Listen)
	Holds Holds // rows held back after a failed settlement

	delays     delays
	deadlines  deadlines
	stopListen func()
	hints      *Hints // the catalogue's answers, given: a subscription that only renders (render.go)
}

// Now is the clock's time as the engine writes it: UTC, to the microsecond.
func (rt *Runtime) Now() time.Time { return rt.Clock.Now().UTC().Truncate(time.Microsecond) }

// BoundLocks makes the rest of tx give up a row-lock wait after the lock timeout, where the
// dialect can say so.
func (rt *Runtime) BoundLocks(ctx context.Context, tx driver.Queryer) error {
	if rt.LockTx == "" {
		return nil
	}
	_, err := tx.Exec(ctx, rt.LockTx)
	return err
}

// Begin starts a transaction whose row-lock waits are bounded.
func (rt *Runtime) Begin(ctx context.Context) (driver.Transaction, error) {
	tx, err := rt.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := rt.BoundLocks(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// WaitReady waits for the poll interval, a wake-up, extra, or ctx.
func (rt *Runtime) WaitReady(ctx context.Context, woken <-chan struct{}, extra <-chan struct{}) error {
	t := rt.Clock.NewTimer(rt.Cfg.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-extra:
	case <-t.C():
	}
	return nil
}

// HoldsDelays reports whether a RetryAfter is kept in the row (a retry_after column, or a
// custom retry_after event), so that core turns a Backoff policy into delays (core.DelayHolder).
func (rt *Runtime) HoldsDelays() bool {
	return rt.S.RetryAfter != "" || rt.Cfg.Events[EventRetryAfter] != nil
}

// Effective turns a RetryAfter on a table without a retry_after column into a Retry, with the
// warning the semantics call for.
func (rt *Runtime) Effective(d *Delivery, v core.Verdict) core.Verdict {
	if v.Action == core.ActRetryAfter && rt.S.RetryAfter == "" && rt.Cfg.Events[EventRetryAfter] == nil {
		rt.Log.Warn("sqlqueue: retry_after on a table without a retry_after column; retrying now",
			"queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.attempt, "retry_after", v.Delay)
		v.Action, v.Delay = core.ActRetry, 0
	}
	return v
}

// Close ends the dialect's listener, the wake-ups and the statement contexts; the source is
// closing.
func (rt *Runtime) Close() {
	if rt.stopListen != nil {
		rt.stopListen()
	}
	if rt.Wake != nil {
		rt.Wake.release()
	}
	rt.delays.stop()
	rt.deadlines.stop()
}

// ErrNotOwnDest is the error of a dead letter to another destination than the subscription's.
var ErrNotOwnDest = errors.New("sqlqueue: dead-letter destination differs from the subscription's DeadLetterAfter destination")

// errUnknownAction reports a verdict the engine has no statement for.
func errUnknownAction(a core.Action) error { return fmt.Errorf("sqlqueue: unknown action %v", a) }
