package sqlqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
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

// failures is a subscription's record of the rows whose settlement failed.
type failures struct {
	n      atomic.Int32 // rows recorded: the success path looks only when there are any
	mu     sync.Mutex
	rows   map[int64]failure
	count  int       // failures since the last log line
	logged time.Time // when the last log line went out
}

// failure is one row's run of failed settlements.
type failure struct {
	times int
	until time.Time
}

// settlementFailed records that d's settlement failed with err and returns until when its row
// is held back; it logs, at most once per FailureLogInterval, how many settlements failed.
func (rt *runtime) settlementFailed(d *delivery, v core.Verdict, err error) (until time.Time, backoff time.Duration) {
	now := rt.clock.Now()
	f := &rt.fails
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
	f.count++
	count, log := f.count, f.logged.IsZero() || now.Sub(f.logged) >= FailureLogInterval
	if log {
		f.count, f.logged = 0, now
	}
	f.mu.Unlock()
	if log {
		rt.log.Warn("sqlqueue: settlements failing; each failing row is held back for a doubling backoff before it is delivered again",
			"queue", rt.q.name, "failures", count, "message_id", d.ID(), "attempt", d.attempt, "verdict", v.String(),
			"held_for", backoff, "error", err)
	}
	rt.wakeAt(backoff)
	return x.until, backoff
}

// settlementOK forgets the failures of a row that settled.
func (rt *runtime) settlementOK(id int64) {
	f := &rt.fails
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	delete(f.rows, id)
	f.n.Store(int32(len(f.rows)))
	f.mu.Unlock()
}

// heldBack reports whether row id is held back at now after a failed settlement.
func (rt *runtime) heldBack(id int64, now time.Time) bool {
	f := &rt.fails
	if f.n.Load() == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.rows[id]
	return ok && now.Before(x.until)
}

// heldCount is how many rows are held back at now: a claim takes that many more, since the
// held ones among them are not handed out.
func (rt *runtime) heldCount(now time.Time) int {
	f := &rt.fails
	if f.n.Load() == 0 {
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

// hold writes the hold of d's row until then into the row, where the table can keep it: the
// lease form moves its lease end (fenced by the token), the others set retry_after (and the
// row-lock form without CountAtClaim counts the attempt the failed settlement rolled back),
// with the last error. It reports whether the hold is in the row; otherwise it is kept in
// memory only (heldBack).
func (rt *runtime) hold(ctx context.Context, q Queryer, d *delivery, v core.Verdict, cause error, until time.Time) bool {
	st := rt.stFor(d)
	if st.hold == "" {
		return false
	}
	var buf [4]any
	a := append(buf[:0], rt.d.Time(until.UTC().Truncate(time.Microsecond)))
	if rt.s.LastError != "" {
		a = append(a, core.Reason(core.Verdict{Action: v.Action, Cause: &SettlementError{Verdict: v, Err: cause}}))
	}
	a = append(a, d.id)
	if rt.q.form == FormLease {
		a = append(a, rt.d.Time(d.token))
	}
	r, err := q.Exec(ctx, st.hold, a...)
	if err != nil {
		rt.log.Warn("sqlqueue: holding back a row whose settlement failed: the hold is kept in this process only",
			"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
		return false
	}
	return r.RowsAffected > 0
}

// holdAlone writes d's hold in a transaction of its own, whose row-lock waits are bounded.
func (rt *runtime) holdAlone(d *delivery, v core.Verdict, cause error, until time.Time) {
	if rt.stFor(d).hold == "" {
		return
	}
	ctx, cancel := rt.background(context.Background())
	defer cancel()
	tx, err := rt.begin(ctx)
	if err != nil {
		rt.log.Warn("sqlqueue: holding back a row whose settlement failed: the hold is kept in this process only",
			"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
		return
	}
	if !rt.hold(ctx, tx, d, v, cause, until) {
		_ = tx.Rollback(ctx)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		rt.log.Warn("sqlqueue: holding back a row whose settlement failed: the hold is kept in this process only",
			"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
	}
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
