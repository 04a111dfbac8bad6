package advisory

import (
	"context"
	"fmt"
	"strconv"

	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// candidate is a ready row the candidates query found.
type candidate struct {
	id     int64
	key    string
	lapsed bool // marked taken, and not held: its last taker went away without settling it
}

// take locks and takes ready rows, at most one per free connection.
func (a *Source) take(ctx context.Context) (int, error) {
	rt := a.rt
	free := a.conns.free()
	if len(free) == 0 || !a.rescue.mayTake(len(free)) {
		return 0, nil
	}
	allFree := len(free) == len(a.conns.all)
	wasRescuing := a.rescue.rescuing
	now := rt.Now()
	// Rows held back after a failed settlement are passed over here (their hold may be in
	// memory only): look at that many more.
	p := driver.ClaimParams{Now: now, Limit: max(rt.Cfg.Batch, len(free)) + rt.Holds.Count(now), Group: rt.Q.Group}
	cands, err := a.candidates(ctx, p)
	if err != nil {
		return 0, err
	}
	a.buf, a.pos = a.buf[:0], 0
	sawLapsed := false
	for _, c := range cands {
		if len(free) == 0 {
			break
		}
		if rt.Holds.HeldBack(c.id, now) || (!c.lapsed && a.rescue.rescuing) {
			continue // held back, or an ordinary row while a lapsed row waits to be taken alone
		}
		d, lapsed, err := a.takeOne(ctx, free[0], c, p, allFree)
		sawLapsed = sawLapsed || lapsed
		if err != nil {
			return len(a.buf), err
		}
		if d == nil {
			continue
		}
		free = free[1:]
		a.buf = append(a.buf, d)
		if d.Suspect() {
			break // taken alone
		}
	}
	a.rescue.done(sawLapsed)
	if wasRescuing && !a.rescue.rescuing && len(a.buf) == 0 {
		// No lapsed row left (another process took it): the ordinary rows this round passed
		// over may go now.
		return a.take(ctx)
	}
	return len(a.buf), nil
}

// candidates runs the candidates query: ready rows, oldest first, with their keys.
func (a *Source) candidates(ctx context.Context, p driver.ClaimParams) ([]candidate, error) {
	rows, err := a.rt.DB.Query(ctx, a.st.candidates, a.st.candB.Bind(p, nil)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cands []candidate
	for rows.Next() {
		var c candidate
		var lapsed int64
		if err := rows.Scan(&c.id, &c.key, &lapsed); err != nil {
			return nil, err
		}
		c.lapsed = lapsed != 0
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return cands, rows.Close()
}

// takeOne takes candidate c on the free connection ac: it locks the row's key and counts its
// attempt. It returns nil when the row is not taken (its key is held, it is lapsed and may not
// be taken now, or it went in between), and saw reports a lapsed row whose key was free. An
// error other than a lost connection, for a round that took nothing yet, passes over the row.
func (a *Source) takeOne(ctx context.Context, ac *conn, c candidate, p driver.ClaimParams, allFree bool) (d *delivery, saw bool, err error) {
	rt := a.rt
	key := keyPrefix(rt) + c.key
	ok, err := a.lock(ctx, ac, key)
	if err != nil || !ok {
		return nil, false, err // !ok: held, its taker is alive
	}
	if c.lapsed && !a.rescue.takesLapsed(allFree, len(a.buf)) {
		// Marked taken, yet its key was free: its taker went away without settling it.
		a.unlock(ac, key)
		return nil, true, nil
	}
	d, err = a.stamp(ctx, ac, c.id, p)
	if err != nil || d == nil {
		a.unlock(ac, key)
		if err != nil && (rt.ConnLost(err) || len(a.buf) > 0) {
			return nil, c.lapsed, err
		}
		if err != nil {
			// The row could not be taken (held locked by another session past the lock
			// timeout, say): the others can.
			rt.Log.Warn("sqlqueue: taking a row failed; passing over it", "queue", rt.Q.Name, "message_id", strconv.FormatInt(c.id, 10), "error", err)
		}
		return nil, c.lapsed, nil
	}
	d.key = key
	d.SetSuspect(c.lapsed)
	a.conns.hold(ac, c.lapsed)
	return d, c.lapsed, nil
}

// lock takes key on ac, giving ac a dedicated connection first if it has none. A dedicated
// connection that went stale (the server restarted, the network dropped) is replaced at once,
// not reported: that would back the whole subscription off for a connection the pool can simply
// make again.
func (a *Source) lock(ctx context.Context, ac *conn, key string) (bool, error) {
	rt := a.rt
	if ac.c == nil {
		if err := dedicate(ctx, rt.DB, rt.LockSession, ac); err != nil {
			return false, err
		}
	}
	ok, err := a.ad.TryLock(ctx, ac.c, key)
	if err != nil && rt.ConnLost(err) {
		discard(ac)
		if err = dedicate(ctx, rt.DB, rt.LockSession, ac); err == nil {
			ok, err = a.ad.TryLock(ctx, ac.c, key)
		}
	}
	if err != nil {
		discard(ac)
		return false, fmt.Errorf("sqlqueue: locking advisory key %q: %w", key, err)
	}
	return ok, nil
}

// stamp counts the attempt of a row whose key is held and reads it; nil when the row is no
// longer ready (another process finished it between the look and the lock).
func (a *Source) stamp(ctx context.Context, ac *conn, id int64, p driver.ClaimParams) (*delivery, error) {
	rt := a.rt
	r, err := ac.c.Exec(ctx, a.st.takeStamp, a.st.takeB.BindID(p, id, nil)...)
	if err != nil || r.RowsAffected == 0 {
		return nil, err
	}
	rows, err := ac.c.Query(ctx, a.st.takeRead, id)
	if err != nil {
		return nil, err
	}
	got, err := scanTaken(rows, id)
	if err != nil || got == nil {
		return nil, err
	}
	d := &delivery{ac: ac}
	d.Init(rt, *got, strconv.FormatInt(id, 10))
	return d, nil
}

// scanTaken reads the taken row id: payload, attempt, headers, created_at.
func scanTaken(rows driver.Rows, id int64) (*driver.Claimed, error) {
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	c := &driver.Claimed{ID: id}
	var att int64
	if err := rows.Scan(&c.Payload, &att, &c.Headers, (*sqltime.Scanner)(&c.CreatedAt)); err != nil {
		return nil, err
	}
	c.Attempt = int(att)
	return c, rows.Close()
}
