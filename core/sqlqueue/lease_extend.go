package sqlqueue

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// This file is the lease form's extension: the extender goroutine renews, at half the lease,
// the leases of the deliveries still being handled. It runs beside claims and flushes and
// never holds them up: it takes no lock of theirs, and it does not wait on a row another
// session holds while other rows wait for their extension.

// extender renews leases until the lease form closes.
func (l *lease) extender(t clock.Timer) {
	defer l.running.Done()
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C():
		}
		t.Reset(l.extend())
	}
}

// extending returns the deliveries whose leases the extender renews: handed out or waiting to
// be, not yet finishing, not lost. Each is returned with its mutex held (a delivery being
// finished right now is left out), so that its token cannot change under a settlement.
func (l *lease) extending() []*delivery {
	// A handler past its Timeout and grace ignores its context: its lease is left to run out,
	// so that another claim can take the row (core reports the overrun).
	var overran time.Time
	if t := l.rt.sub.Options.Timeout; t > 0 {
		overran = l.rt.clock.Now().Add(-(t + core.TimeoutGrace(t)))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []*delivery
	for _, b := range l.batches {
		for i := range b.ds {
			d := &b.ds[i]
			if !d.mu.TryLock() {
				continue // being finished right now
			}
			if d.finishing || d.settled || d.lost {
				d.mu.Unlock()
				continue
			}
			if !d.handedAt.IsZero() && d.handedAt.Before(overran) {
				if !d.overran {
					d.overran = true
					l.rt.log.Warn("sqlqueue: handler past its timeout and grace; its lease is no longer extended and another claim may take the row",
						"queue", l.rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "locked_until", d.token)
				}
				d.mu.Unlock()
				continue
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// extend renews the lease of every delivery still being handled, and returns when the next
// round is due: at half the lease, or sooner when a row another session holds could not be
// renewed. A row whose lease already belongs to a later claim is marked lost; its settlement
// will report ErrLeaseLost.
func (l *lease) extend() time.Duration {
	rt := l.rt
	next := rt.cfg.lease / 2
	ds := l.extending()
	if len(ds) == 0 {
		return next
	}
	ctx, cancel := rt.background(context.Background())
	defer cancel()
	held, err := l.renew(ctx, ds, false)
	if err != nil {
		held = nil
		rt.log.Error("sqlqueue: extending leases", "queue", rt.q.name, "rows", len(ds), "error", err)
		next = min(next, rt.cfg.lockWait)
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
		if _, err := l.renew(ctx, []*delivery{d}, true); err != nil {
			rt.log.Warn("sqlqueue: a leased row is locked by another session; its lease could not be extended, trying again",
				"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "locked_until", d.token, "error", err)
			next = min(next, rt.cfg.lockWait)
		}
		d.mu.Unlock()
	}
	return next
}

// lockRows locks the rows of ds in tx (RowLocking only) and returns the ids it holds: skipping
// the rows another session holds, or, with wait, waiting for them within the lock timeout.
func (l *lease) lockRows(ctx context.Context, tx Queryer, ds []*delivery, wait bool) (map[int64]bool, error) {
	rt := l.rt
	sql := rt.st.lockIDs.SQL(len(ds))
	if wait {
		sql = rt.st.waitIDs.SQL(len(ds))
	}
	args := make([]any, len(ds))
	for i, d := range ds {
		args[i] = d.id
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
func (l *lease) renew(ctx context.Context, ds []*delivery, wait bool) (held []*delivery, err error) {
	rt := l.rt
	tx, err := rt.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	mine := ds
	if rt.rowLocks != nil {
		got, err := l.lockRows(ctx, tx, ds, wait)
		if err != nil {
			return nil, err
		}
		mine = make([]*delivery, 0, len(ds))
		for _, d := range ds {
			switch {
			case got[d.id]:
				mine = append(mine, d)
			case wait: // waited for and not there: the row is gone, settled by a later claim
				l.lostWhileHandled(d)
			default:
				held = append(held, d) // held by another session (or gone: the wait finds out)
			}
		}
	}
	tok := rt.nextToken(rt.now().Add(rt.cfg.lease))
	renewed := make([]bool, len(mine))
	for i, d := range mine {
		r, err := tx.Exec(ctx, rt.st.extend, rt.d.Time(tok), d.id, rt.d.Time(d.token))
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
			l.lostWhileHandled(d)
		}
	}
	if len(mine) > 0 {
		rt.log.Debug("sqlqueue: leases extended", "queue", rt.q.name, "rows", len(mine), "locked_until", tok)
	}
	return held, nil
}

// lostWhileHandled marks d's lease lost: a later claim owns its row (or has settled it). The
// caller holds d.mu.
func (l *lease) lostWhileHandled(d *delivery) {
	d.lost = true
	l.rt.log.Warn("sqlqueue: lease lost while the handler works; another claim owns the row",
		"queue", l.rt.q.name, "message_id", d.ID(), "attempt", d.attempt)
}
