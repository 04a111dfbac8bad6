package lease

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file is the lease form's extension: the extender goroutine renews, at half the lease,
// the leases of the deliveries still being handled. It runs beside claims and flushes and
// never holds them up: it takes no lock of theirs, and it does not wait on a row another
// session holds while other rows wait for their extension.

// extender renews the leases of the deliveries still being handled, from a goroutine of its
// own; it has no state but its timer.
type extender struct{ src *Source }

// run renews leases until stop.
func (e extender) run(t clock.Timer, stop <-chan struct{}) {
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C():
		}
		t.Reset(e.extend())
	}
}

// extend renews the lease of every delivery still being handled, and returns when the next
// round is due: at half the lease, or sooner when a row another session holds could not be
// renewed. A row whose lease already belongs to a later claim is marked lost; its settlement
// will report ErrLeaseLost.
func (e extender) extend() time.Duration {
	l, rt := e.src, e.src.rt
	next := rt.Cfg.Lease / 2
	// A handler past its Timeout and grace ignores its context: its lease is left to run out,
	// so that another claim can take the row (core reports the overrun).
	var overran time.Time
	if t := rt.Sub.Options.Timeout; t > 0 {
		overran = rt.Clock.Now().Add(-(t + core.TimeoutGrace(t)))
	}
	ds := l.track.extending(overran, func(d *delivery) {
		rt.Log.Warn("sqlqueue: handler past its timeout and grace; its lease is no longer extended and another claim may take the row",
			"queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt(), "locked_until", d.token)
	})
	if len(ds) == 0 {
		return next
	}
	ctx, cancel := rt.Background(context.Background())
	defer cancel()
	held, err := e.renew(ctx, ds, false)
	if err != nil {
		held = nil
		rt.Log.Error("sqlqueue: extending leases", "queue", rt.Q.Name, "rows", len(ds), "error", err)
		next = min(next, rt.Cfg.LockWait)
	}
	// Each delivery is free to settle as soon as its own extension is over.
	isHeld := make(map[*delivery]bool, len(held))
	for _, d := range held {
		isHeld[d] = true
	}
	for _, d := range ds {
		if !isHeld[d] {
			d.mu.Unlock()
		}
	}
	// Rows another session holds: each is waited for alone, for at most the lock timeout, after
	// the others were renewed, so that one held row delays no other.
	for _, d := range held {
		if _, err := e.renew(ctx, []*delivery{d}, true); err != nil {
			rt.Log.Warn("sqlqueue: a leased row is locked by another session; its lease could not be extended, trying again",
				"queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt(), "locked_until", d.token, "error", err)
			next = min(next, rt.Cfg.LockWait)
		}
		d.mu.Unlock()
	}
	return next
}

// lockRows locks the rows of ds in tx (RowLocking only) and returns the ids it holds: skipping
// the rows another session holds, or, with wait, waiting for them within the lock timeout.
func (l *Source) lockRows(ctx context.Context, tx driver.Queryer, ds []*delivery, wait bool) (map[int64]bool, error) {
	sql := l.st.lockIDs.SQL(len(ds))
	if wait {
		sql = l.st.waitIDs.SQL(len(ds))
	}
	args := make([]any, len(ds))
	for i, d := range ds {
		args[i] = d.RowID()
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	got := make(map[int64]bool, len(ds))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		got[id] = true
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return got, nil
}

// renew extends the leases of ds in one transaction. With RowLocking it first locks their rows
// (skipping, unless wait, the rows another session holds: those are returned in held), and
// takes the new lease end from the clock only once it holds them, so that an end computed
// before a wait is never written after it. The callers hold each delivery's mutex.
func (e extender) renew(ctx context.Context, ds []*delivery, wait bool) (held []*delivery, err error) {
	l, rt := e.src, e.src.rt
	tx, err := rt.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	mine := ds
	if rt.RowLocks != nil {
		got, err := l.lockRows(ctx, tx, ds, wait)
		if err != nil {
			return nil, err
		}
		mine = make([]*delivery, 0, len(ds))
		for _, d := range ds {
			switch {
			case got[d.RowID()]:
				mine = append(mine, d)
			case wait: // waited for and not there: the row is gone, settled by a later claim
				e.lostWhileHandled(d)
			default:
				held = append(held, d) // held by another session (or gone: the wait finds out)
			}
		}
	}
	tok := l.tokens.next(rt.Now().Add(rt.Cfg.Lease))
	renewed := make([]bool, len(mine))
	for i, d := range mine {
		r, err := tx.Exec(ctx, l.st.extend, rt.D.Time(tok), d.RowID(), rt.D.Time(d.token))
		if err != nil {
			return nil, err
		}
		renewed[i] = r.RowsAffected > 0
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	for i, d := range mine {
		if renewed[i] {
			d.token = tok
		} else {
			e.lostWhileHandled(d)
		}
	}
	if len(mine) > 0 {
		rt.Log.Debug("sqlqueue: leases extended", "queue", rt.Q.Name, "rows", len(mine), "locked_until", tok)
	}
	return held, nil
}

// lostWhileHandled marks d's lease lost: a later claim owns its row (or has settled it). The
// caller holds d.mu.
func (e extender) lostWhileHandled(d *delivery) {
	d.lost = true
	e.src.rt.Log.Warn("sqlqueue: lease lost while the handler works; another claim owns the row",
		"queue", e.src.rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt())
}
