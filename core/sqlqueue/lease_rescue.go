package sqlqueue

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file is the lease form's rescue of lapsed claims. A row whose lease ran out without a
// settlement (locked_until set and past: a settlement or a release clears it, a failed
// settlement's hold goes into retry_after) was claimed by a process that died, hung or lost its
// connection before settling it. It may be the row that killed that process, or one of the rows
// claimed beside it that never reached a handler; the attempt the claim counted was charged to
// all of them. So that a poison row cannot take its neighbours down with it, the ordinary claim
// takes only rows no claim holds (locked_until NULL), and lapsed rows are taken by the rescue
// claim, one at a time, when this process holds nothing else and while it takes nothing else,
// and handed out as suspect (core runs them with no other handler of the subscription). A crash
// in the handler of a lapsed row then charges an attempt to that row alone: the poison row
// reaches the cap and its dead letter, its neighbours were charged at most the one attempt of
// the claim they shared with it. The rescue claim itself counts nothing (doClaim takes the
// attempt back in its transaction): the row is counted as its handler starts (Charge), so a
// process that dies between the two — the rescued row waits there until the subscription's
// other handlers have returned — does not charge it again.
//
// The rescue costs nothing in the ordinary path: a claimant looks for lapsed rows when it
// starts and then once per half lease (one SELECT … LIMIT 1, in the background: the claims do
// not wait for it, lapsed_look.go); only when it finds one does it
// stop claiming until its handlers are done, and rescue lapsed rows one by one until there is
// none left. It waits for its handlers at most a second (rescueWaitFor), then claims ordinary
// rows for five times that before it tries again: a handler that runs long does not stop the
// ordinary claims.

// rescueDue decides, when a claimant needs rows, whether the claim takes a lapsed row: it
// returns with l.lapsed set when it does. It may wait for the deliveries handed out to finish.
func (l *lease) rescueDue(ctx context.Context) error {
	rt := l.rt
	if rt.rescue == nil {
		return nil
	}
	now := rt.clock.Now()
	if !l.rescuing {
		found, looked, err := l.look.result()
		if !looked && !now.Before(l.rescueAt) {
			l.rescueAt = now.Add(rt.cfg.lease / 2)
			// A look, not the rescue claim: a claim that finds nothing would still spend a
			// token. It runs in the background where it can (lapsed_look.go).
			l.look.start(ctx, rt, func(ctx context.Context) (bool, error) { return l.probeLapsed(ctx, now) })
			found, looked, err = l.look.result()
		}
		if !looked {
			return nil
		}
		if err != nil || !found {
			return err
		}
		l.rescuing = true
		l.rescueBy = now.Add(rescueWaitFor(rt.cfg.lease))
	}
	// Nothing more is claimed until the deliveries handed out have finished (their
	// settlements go with the rescue claim), for at most rescueWaitFor.
	if err := l.awaitIdle(ctx, l.rescueBy); err != nil {
		return err
	}
	if l.busy.count() > 0 {
		rt.log.Warn("sqlqueue: rows whose leases ran out wait to be taken one at a time; handlers still running",
			"queue", rt.q.name, "running", l.busy.count(), "waited", rescueWaitFor(rt.cfg.lease))
		l.rescuing = false
		// The ordinary claims go on for a while before the next try.
		l.rescueAt = rt.clock.Now().Add(rescueCooldown * rescueWaitFor(rt.cfg.lease))
		return nil
	}
	l.lapsed = true
	return nil
}

// rescued is called after a claim that rescueDue set up: no lapsed row left ends the rescue.
func (l *lease) rescued(b *leaseBatch) {
	if b == nil {
		l.rescuing = false
		l.rescueAt = l.rt.clock.Now().Add(l.rt.cfg.lease / 2)
		return
	}
	for i := range b.ds {
		b.ds[i].suspect = true
		b.ds[i].uncharged = l.rt.st.charge != "" // its claim took the attempt back (doClaim)
	}
	l.rescueBy = l.rt.clock.Now().Add(rescueWaitFor(l.rt.cfg.lease))
}

// rescueCooldown is how many of its waits a claimant that gave up waiting for its handlers
// claims ordinary rows before it tries to rescue again.
const rescueCooldown = 5

// rescueWaitFor is how long a claimant of lease length lease waits for its handlers before a
// rescue claim: at most a second, so that a handler that runs long (or a settlement that hangs
// on a dead connection) holds up the ordinary claims only briefly.
func rescueWaitFor(lease time.Duration) time.Duration { return min(lease, time.Second) }

// probeLapsed reports whether the queue has a row whose lease ran out without a settlement.
func (l *lease) probeLapsed(ctx context.Context, now time.Time) (bool, error) {
	return l.rt.probe(ctx, l.rt.lapsedProbe, l.rt.lapsedProbeB, ClaimParams{Now: now, Group: l.rt.q.group})
}

// probe reports whether query, a look for lapsed rows bound by b, finds one (lease and row
// lock).
func (rt *runtime) probe(ctx context.Context, query string, b *driver.Binder, p ClaimParams) (bool, error) {
	rows, err := rt.db.Query(ctx, query, b.Bind(p, nil)...)
	if err != nil {
		return false, err
	}
	found := rows.Next()
	rows.Close()
	return found, rows.Err()
}

// unfinished counts a claimant's claimed deliveries that have not finished (lease and row
// lock): a rescue of lapsed rows waits until none is left. One atomic add on the Finish path.
type unfinished struct {
	n    atomic.Int64
	idle chan struct{} // signalled, without blocking, when the count falls to zero
}

func (u *unfinished) add(n int) { u.n.Add(int64(n)) }

// done counts n of them finished.
func (u *unfinished) done(n int) {
	if n > 0 && u.n.Add(-int64(n)) == 0 {
		select {
		case u.idle <- struct{}{}:
		default:
		}
	}
}

func (u *unfinished) count() int { return int(u.n.Load()) }

// awaitIdle waits until every claimed delivery has finished, or until by on the clock.
func (l *lease) awaitIdle(ctx context.Context, by time.Time) error {
	for l.busy.count() > 0 {
		wait := by.Sub(l.rt.clock.Now())
		if wait <= 0 {
			return nil
		}
		t := l.rt.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-l.busy.idle:
		case <-t.C():
		}
		t.Stop()
	}
	return nil
}

// Charge counts the attempt of a rescued row as its handler starts (core.Charger): a committed
// UPDATE fenced by its lease. Its rescue claim took the attempt back (lease_claim.go's
// doClaim), so a process that dies between the rescue and the handler — the rescued row waits
// for the subscription's other handlers to finish, since it runs alone — charges it nothing.
// ErrLeaseLost when another claim holds the row by now. Other deliveries count nothing here.
func (d *delivery) Charge(ctx context.Context) error {
	if !d.uncharged {
		return nil
	}
	rt := d.rt
	ctx, cancel := context.WithTimeout(ctx, rt.cfg.stmtTimeout)
	defer cancel()
	// The extender skips a delivery whose mutex is held: the token cannot change meanwhile.
	d.mu.Lock()
	defer d.mu.Unlock()
	r, err := rt.db.Exec(ctx, rt.st.charge, d.id, rt.d.Time(d.token))
	switch {
	case err != nil:
		return err
	case r.RowsAffected == 0:
		return ErrLeaseLost
	}
	d.uncharged = false
	return nil
}
