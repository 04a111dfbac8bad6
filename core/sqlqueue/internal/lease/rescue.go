package lease

import (
	"context"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
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
// not wait for it, look.go); only when it finds one does it
// stop claiming until its handlers are done, and rescue lapsed rows one by one until there is
// none left. It waits for its handlers at most a second (rescueWaitFor), then claims ordinary
// rows for five times that before it tries again: a handler that runs long does not stop the
// ordinary claims.

// rescuer is the lease form's rescue of lapsed claims; it runs in the claim cycles, never
// concurrently (see claimer).
type rescuer struct {
	src      *Source
	rescuing bool       // taking lapsed rows, one at a time, until there is none
	lapsed   bool       // this cycle's claim takes a lapsed row
	at       time.Time  // when to look for lapsed rows again
	by       time.Time  // how long to wait for the handlers before a rescue claim
	look     lapsedLook // the look for lapsed rows
}

// due decides, when a claimant needs rows, whether the claim takes a lapsed row: it returns
// with r.lapsed set when it does. It may wait for the deliveries handed out to finish.
func (r *rescuer) due(ctx context.Context) error {
	l, rt := r.src, r.src.rt
	if l.st.rescue == nil {
		return nil
	}
	now := rt.Clock.Now()
	if !r.rescuing {
		found, looked, err := r.look.result()
		if !looked && !now.Before(r.at) {
			r.at = now.Add(rt.Cfg.Lease / 2)
			// A look, not the rescue claim: a claim that finds nothing would still spend a
			// token. It runs in the background where it can (look.go).
			r.look.start(ctx, rt, func(ctx context.Context) (bool, error) { return r.probe(ctx, now) })
			found, looked, err = r.look.result()
		}
		if !looked {
			return nil
		}
		if err != nil || !found {
			return err
		}
		r.rescuing = true
		r.by = now.Add(engine.RescueWaitFor(rt.Cfg.Lease))
	}
	// Nothing more is claimed until the deliveries handed out have finished (their
	// settlements go with the rescue claim), for at most rescueWaitFor.
	if err := l.busy.AwaitIdle(ctx, rt.Clock, r.by); err != nil {
		return err
	}
	if l.busy.Count() > 0 {
		rt.Log.Warn("sqlqueue: rows whose leases ran out wait to be taken one at a time; handlers still running",
			"queue", rt.Q.Name, "running", l.busy.Count(), "waited", engine.RescueWaitFor(rt.Cfg.Lease))
		r.rescuing = false
		// The ordinary claims go on for a while before the next try.
		r.at = rt.Clock.Now().Add(engine.RescueCooldown * engine.RescueWaitFor(rt.Cfg.Lease))
		return nil
	}
	r.lapsed = true
	return nil
}

// rescued is called after a claim that due set up: no lapsed row left ends the rescue.
func (r *rescuer) rescued(b *batch) {
	rt := r.src.rt
	if b == nil {
		r.rescuing = false
		r.at = rt.Clock.Now().Add(rt.Cfg.Lease / 2)
		return
	}
	for i := range b.ds {
		b.ds[i].SetSuspect(true)
		b.ds[i].uncharged = r.src.st.charge != "" // its claim took the attempt back (doClaim)
	}
	r.by = rt.Clock.Now().Add(engine.RescueWaitFor(rt.Cfg.Lease))
}

// probe reports whether the queue has a row whose lease ran out without a settlement.
func (r *rescuer) probe(ctx context.Context, now time.Time) (bool, error) {
	rt, st := r.src.rt, r.src.st
	rows, err := rt.DB.Query(ctx, st.probe, st.probeB.Bind(driver.ClaimParams{Now: now, Group: rt.Q.Group}, nil)...)
	if err != nil {
		return false, err
	}
	found := rows.Next()
	rows.Close()
	return found, rows.Err()
}
