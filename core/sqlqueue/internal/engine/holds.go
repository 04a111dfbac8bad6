package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// A settlement can fail while the handler succeeded: a custom event that errors, a trigger
// that refuses the dialect's statement, a plugin that crashes, a row lock held past the lock
// timeout. The row is then left as it was, and without more it would come back at once and run
// its handler again in a tight loop, starving the rest of the queue. Instead each such row is
// held back for a backoff on the App's clock that doubles with each consecutive failure of that
// row, from FailureBackoff up to FailureBackoffMax, written into the row where the table can
// keep it (lease form: locked_until; otherwise retry_after) and kept in memory otherwise. The
// backoff is per row: other ready rows keep flowing. The attempt was counted when the row was
// taken (lease, advisory, and the row-lock form with CountAtClaim; otherwise the hold counts
// it), so DeadLetterAfter still ends the loop: the delivery past the cap goes to the dead
// letter without its handler. The failures are logged at most once per FailureLogInterval,
// with how many there were.
const (
	// FailureBackoff is how long a row whose settlement failed is held back the first time.
	FailureBackoff = time.Second
	// FailureBackoffMax bounds the doubling backoff of a row whose settlement keeps failing.
	FailureBackoffMax = time.Minute
	// FailureLogInterval is the least time between two log lines about failing settlements.
	FailureLogInterval = 10 * time.Second
)

// Holds is a subscription's record of the rows whose settlement failed, held back in memory
// (and in the row where the table can keep it, Hold).
type Holds struct {
	rt   *Runtime
	n    atomic.Int32 // rows recorded: the success path looks only when there are any
	mu   sync.Mutex
	rows map[int64]failure
	pace core.LogPace // the warning about failing settlements
}

// failure is one row's run of failed settlements.
type failure struct {
	times int
	until time.Time
}

func (f *Holds) init(rt *Runtime) { f.rt = rt }

// Failed records that d's settlement failed with err and returns until when its row is held
// back; it logs, at most once per FailureLogInterval, how many settlements failed.
func (f *Holds) Failed(d *Delivery, v core.Verdict, err error) (until time.Time, backoff time.Duration) {
	rt := f.rt
	now := rt.Clock.Now()
	f.mu.Lock()
	if f.rows == nil {
		f.rows = map[int64]failure{}
	}
	for id, x := range f.rows { // forget rows long past their hold: settled by another process
		if now.Sub(x.until) > FailureBackoffMax {
			delete(f.rows, id)
		}
	}
	x := f.rows[d.id]
	x.times++
	backoff = FailureBackoffMax
	if x.times <= 16 {
		backoff = min(FailureBackoff<<(x.times-1), FailureBackoffMax)
	}
	x.until = now.Add(backoff)
	f.rows[d.id] = x
	f.n.Store(int32(len(f.rows)))
	f.mu.Unlock()
	if log, skipped := f.pace.Allow(now, FailureLogInterval); log {
		count := skipped + 1
		rt.Log.Warn("sqlqueue: settlements failing; each failing row is held back for a doubling backoff before it is delivered again",
			"queue", rt.Q.Name, "failures", count, "message_id", d.ID(), "attempt", d.attempt, "verdict", v.String(),
			"held_for", backoff, "error", err)
	}
	rt.WakeAt(backoff)
	return x.until, backoff
}

// Settled forgets the failures of a row that settled.
func (f *Holds) Settled(id int64) {
	if !f.Any() {
		return
	}
	f.mu.Lock()
	delete(f.rows, id)
	f.n.Store(int32(len(f.rows)))
	f.mu.Unlock()
}

// Any reports whether any row is recorded (one atomic load).
func (f *Holds) Any() bool { return f.n.Load() != 0 }

// HeldBack reports whether row id is held back at now after a failed settlement.
func (f *Holds) HeldBack(id int64, now time.Time) bool {
	if !f.Any() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.rows[id]
	return ok && now.Before(x.until)
}

// Count is how many rows are held back at now: a claim takes that many more, since the held
// ones among them are not handed out.
func (f *Holds) Count(now time.Time) int {
	if !f.Any() {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, x := range f.rows {
		if now.Before(x.until) {
			n++
		}
	}
	return n
}

// Hold writes the hold of d's row until then into the row with st.Hold, where the table can keep
// it (a fenced statement by token: the lease form moves its lease end; the others set
// retry_after, and the row-lock form without CountAtClaim counts the attempt the failed
// settlement rolled back), with the last error. It reports whether the hold is in the row;
// otherwise it is kept in memory only (HeldBack).
func (f *Holds) Hold(ctx context.Context, q driver.Queryer, st *Settlements, d *Delivery, token time.Time, v core.Verdict, cause error, until time.Time) bool {
	rt := f.rt
	if st.Hold == "" {
		return false
	}
	var buf [4]any
	a := append(buf[:0], rt.D.Time(until.UTC().Truncate(time.Microsecond)))
	if rt.S.LastError != "" {
		a = append(a, core.Reason(core.Verdict{Action: v.Action, Cause: &SettlementError{Verdict: v, Err: cause}}))
	}
	r, err := q.Exec(ctx, st.Hold, rt.row(a, st, d, token)...)
	if err != nil {
		f.warn(d, err)
		return false
	}
	return r.RowsAffected > 0
}

// HoldAlone writes d's hold in a transaction of its own, whose row-lock waits are bounded.
func (f *Holds) HoldAlone(st *Settlements, d *Delivery, token time.Time, v core.Verdict, cause error, until time.Time) {
	rt := f.rt
	if st.Hold == "" {
		return
	}
	ctx, cancel := rt.Background(context.Background())
	defer cancel()
	tx, err := rt.Begin(ctx)
	if err != nil {
		f.warn(d, err)
		return
	}
	if !f.Hold(ctx, tx, st, d, token, v, cause, until) {
		_ = tx.Rollback(ctx)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		f.warn(d, err)
	}
}

// warn logs a hold that could not be written into the row.
func (f *Holds) warn(d *Delivery, err error) {
	f.rt.Log.Warn("sqlqueue: holding back a row whose settlement failed: the hold is kept in this process only",
		"queue", f.rt.Q.Name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
}

// SettlementError is what a row whose settlement failed records as its last error.
type SettlementError struct {
	// Verdict is the settlement that failed.
	Verdict core.Verdict
	// Err is why.
	Err error
}

func (e *SettlementError) Error() string {
	return "settling " + e.Verdict.String() + " failed: " + e.Err.Error()
}

// Unwrap returns why the settlement failed.
func (e *SettlementError) Unwrap() error { return e.Err }
