package rowlock

import (
	"context"
	"sync"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// This file is the row-lock form's rescue of lapsed claims. A claim that counts its attempts
// (CountAtClaim) commits attempt + 1 before it locks its rows; where the table has locked_until,
// that count also marks the rows there, and every settlement clears the mark. A marked row that
// no claim holds lapsed: the claim that counted it ended without settling it (its process died,
// its connection was terminated, the server restarted). It may be the row that killed the
// process, or one claimed beside it; the count was charged to all of them. So that a poison row
// cannot take its neighbours down with it, the ordinary claims take only unmarked rows, and a
// lapsed row is taken by the rescue, alone, when the process holds no other claimed row and
// while it takes nothing else, counted again and handed out as suspect (core runs it with no
// other handler of the subscription). A crash in its handler charges that row alone.
//
// The rescue costs nothing per claim: a claimant looks for lapsed rows when it starts, after a
// counted claim of its own failed, and then every rescueEvery (one SELECT … LIMIT 1 … SKIP
// LOCKED, which passes over rows live claims hold). While lapsed rows wait, it claims nothing
// until its claimed rows have finished, for at most rescueWait, then claims ordinary rows for
// five times that before it tries again.
const (
	rescueEvery = 2 * time.Second
	rescueWait  = time.Second
)

// rescuer is the row-lock form's rescue of lapsed claims. rescuing and by are the claims'
// only (never concurrent); when to look next is shared with the commits of failed claims,
// under its lock.
type rescuer struct {
	src      *Source
	rescuing bool
	by       time.Time

	mu sync.Mutex
	at time.Time // when to look for lapsed rows again
}

// due decides, when the claimant needs rows, whether it takes a lapsed row (take), or claims
// nothing for now (hold: lapsed rows wait for the claimed rows to finish).
func (r *rescuer) due(ctx context.Context) (take, hold bool, err error) {
	rt := r.src.rt
	now := rt.Clock.Now()
	if !r.rescuing {
		r.mu.Lock()
		due := !now.Before(r.at)
		if due {
			r.at = now.Add(rescueEvery)
		}
		r.mu.Unlock()
		if !due {
			return false, false, nil
		}
		found, err := r.probe(ctx, now)
		if err != nil || !found {
			return false, false, err
		}
		r.rescuing, r.by = true, now.Add(rescueWait)
	}
	if r.src.busy.Count() == 0 {
		return true, false, nil
	}
	if now.Before(r.by) {
		return false, true, nil
	}
	rt.Log.Warn("sqlqueue: rows whose claims lapsed wait to be taken one at a time; claimed rows still unfinished",
		"queue", rt.Q.Name, "waited", rescueWait)
	r.rescuing = false
	r.mu.Lock()
	r.at = now.Add(engine.RescueCooldown * rescueWait) // ordinary claims for a while first
	r.mu.Unlock()
	return false, false, nil
}

// rescued records the outcome of a rescue claim: took says it found a lapsed row.
func (r *rescuer) rescued(took bool) {
	if took {
		r.by = r.src.rt.Clock.Now().Add(rescueWait)
		return
	}
	r.rescuing = false
}

// lapsedNow has the next claim look for lapsed rows.
func (r *rescuer) lapsedNow() {
	r.mu.Lock()
	r.at = time.Time{}
	r.mu.Unlock()
}

// probe reports whether the queue has a lapsed row no claim holds.
func (r *rescuer) probe(ctx context.Context, now time.Time) (bool, error) {
	rt, st := r.src.rt, r.src.st
	rows, err := rt.DB.Query(ctx, st.lapsedSel, st.lapsedB.Bind(driver.ClaimParams{Now: now, Limit: 1, Group: rt.Q.Group}, nil)...)
	if err != nil {
		return false, err
	}
	found := rows.Next()
	rows.Close()
	return found, rows.Err()
}
