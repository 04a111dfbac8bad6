package sqlqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// advisory is the advisory-lock form's source and finisher. Each worker has a dedicated
// connection; a row is taken by locking its key on a free connection (TryLock), then counting
// the attempt. Its finishing statement commits on its own on that connection, and the key is
// unlocked afterwards, also when the statement failed.
type advisory struct {
	rt *runtime
	ad AdvisoryDialect

	buf      []*delivery
	pos      int
	out      outage // while the database does not answer
	released chan struct{}

	// the rescue of lapsed takes (advisory_rescue.go), used by Next only
	rescuing bool
	rescueBy time.Time // until when to wait for the connections to come free
	rescueAt time.Time // no new wait before then (after one that gave up)

	mu      sync.Mutex
	conns   []*advConn
	suspect *advConn // holds a suspect delivery: nothing else is taken meanwhile
}

// advConn is one dedicated connection; it holds at most one delivery's key.
type advConn struct {
	c    Conn
	busy bool
}

func newAdvisory(rt *runtime) *advisory {
	a := &advisory{rt: rt, ad: rt.q.adv, released: make(chan struct{}, 1)}
	for range max(rt.sub.Options.Workers, 1) {
		a.conns = append(a.conns, &advConn{})
	}
	return a
}

func (a *advisory) Next(ctx context.Context) (core.Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		if a.pos < len(a.buf) {
			d := a.buf[a.pos]
			a.buf[a.pos] = nil
			a.pos++
			return d, nil
		}
		woken := a.rt.wake.wait()
		n, err := a.take(ctx)
		if a.rt.connLost(err) {
			if err := a.rt.awaitServer(ctx, &a.out, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		a.rt.serverBack(&a.out)
		if n > 0 {
			continue
		}
		if a.holdsSuspect() {
			// A suspect runs alone: nothing is taken until it is settled.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-a.released:
			}
			continue
		}
		if err := a.rt.waitReady(ctx, woken, a.released); err != nil {
			return nil, err
		}
	}
}

func (a *advisory) free() []*advConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*advConn
	for _, c := range a.conns {
		if !c.busy {
			out = append(out, c)
		}
	}
	return out
}

type candidate struct {
	id     int64
	key    string
	lapsed bool // marked taken, and not held: its last taker went away without settling it
}

// take locks and takes ready rows, at most one per free connection.
func (a *advisory) take(ctx context.Context) (int, error) {
	rt := a.rt
	free := a.free()
	if len(free) == 0 || !a.mayTake(len(free)) {
		return 0, nil
	}
	allFree := len(free) == len(a.conns)
	wasRescuing := a.rescuing
	now := rt.now()
	// Rows held back after a failed settlement are passed over here (their hold may be in
	// memory only): look at that many more.
	p := ClaimParams{Now: now, Limit: max(rt.cfg.batch, len(free)) + rt.heldCount(now), Group: rt.q.group}
	rows, err := rt.db.Query(ctx, rt.st.candidates, rt.st.candB.Bind(p, nil)...)
	if err != nil {
		return 0, err
	}
	var cands []candidate
	for rows.Next() {
		var c candidate
		var lapsed int64
		if err := rows.Scan(&c.id, &c.key, &lapsed); err != nil {
			rows.Close()
			return 0, err
		}
		c.lapsed = lapsed != 0
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, err
	}
	rows.Close()
	a.buf, a.pos = a.buf[:0], 0
	prefix := rt.keyPrefix()
	sawLapsed := false
	for _, c := range cands {
		if len(free) == 0 {
			break
		}
		if rt.heldBack(c.id, now) {
			continue
		}
		if !c.lapsed && a.rescuing {
			continue // a lapsed row waits to be taken alone
		}
		ac := free[0]
		if ac.c == nil {
			if err := a.dedicate(ctx, ac); err != nil {
				return len(a.buf), err
			}
		}
		key := prefix + c.key
		ok, err := a.ad.TryLock(ctx, ac.c, key)
		if err != nil && rt.connLost(err) {
			// A dedicated connection that went stale (the server restarted, the network
			// dropped) is replaced at once, not reported: that would back the whole
			// subscription off for a connection the pool can simply make again.
			a.discard(ac)
			if err = a.dedicate(ctx, ac); err == nil {
				ok, err = a.ad.TryLock(ctx, ac.c, key)
			}
		}
		if err != nil {
			a.discard(ac)
			return len(a.buf), fmt.Errorf("sqlqueue: locking advisory key %q: %w", key, err)
		}
		if !ok {
			continue // held: its taker is alive
		}
		if c.lapsed {
			// Marked taken, yet its key was free: its taker went away without settling it.
			sawLapsed = true
			if !a.takesLapsed(allFree) {
				a.unlock(ac, key)
				continue
			}
		}
		d, err := a.stamp(ctx, ac, c.id, p)
		if err != nil || d == nil {
			a.unlock(ac, key)
			if err != nil {
				if rt.connLost(err) || len(a.buf) > 0 {
					return len(a.buf), err
				}
				// The row could not be taken (held locked by another session past the lock
				// timeout, say): the others can.
				rt.log.Warn("sqlqueue: taking a row failed; passing over it", "queue", rt.q.name, "message_id", strconv.FormatInt(c.id, 10), "error", err)
			}
			continue
		}
		d.key = key
		d.suspect = c.lapsed
		a.mu.Lock()
		ac.busy = true
		if d.suspect {
			a.suspect = ac
		}
		a.mu.Unlock()
		free = free[1:]
		a.buf = append(a.buf, d)
		if d.suspect {
			break // taken alone
		}
	}
	a.rescueDone(sawLapsed)
	if wasRescuing && !a.rescuing && len(a.buf) == 0 {
		// No lapsed row left (another process took it): the ordinary rows this round passed
		// over may go now.
		return a.take(ctx)
	}
	return len(a.buf), nil
}

// dedicate gives ac a connection of its own from the pool, whose row-lock waits are bounded by
// the subscription's lock timeout.
func (a *advisory) dedicate(ctx context.Context, ac *advConn) error {
	rt := a.rt
	conn, err := rt.db.Conn(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if rt.lockSession != "" {
		if _, err := conn.Exec(ctx, rt.lockSession); err != nil {
			_ = conn.Discard()
			return err
		}
	}
	ac.c = conn
	return nil
}

// stamp counts the attempt of a row whose key is held and reads it; nil when the row is no
// longer ready (another process finished it between the look and the lock).
func (a *advisory) stamp(ctx context.Context, ac *advConn, id int64, p ClaimParams) (*delivery, error) {
	rt := a.rt
	args := rt.st.takeB.BindID(p, id, nil)
	r, err := ac.c.Exec(ctx, rt.st.takeStamp, args...)
	if err != nil || r.RowsAffected == 0 {
		return nil, err
	}
	rows, err := ac.c.Query(ctx, rt.st.takeRead, id)
	if err != nil {
		return nil, err
	}
	got, err := scanTaken(rows, id)
	if err != nil || got == nil {
		return nil, err
	}
	return &delivery{rt: rt, id: id, idStr: strconv.FormatInt(id, 10), attempt: got.Attempt, payload: got.Payload, headers: got.Headers, createdAt: got.CreatedAt, ac: ac}, nil
}

func scanTaken(rows Rows, id int64) (*Claimed, error) {
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	c := &Claimed{ID: id}
	var att int64
	if err := rows.Scan(&c.Payload, &att, &c.Headers, (*sqltime.Scanner)(&c.CreatedAt)); err != nil {
		return nil, err
	}
	c.Attempt = int(att)
	return c, rows.Close()
}

// Finish runs d's statement on its connection, then unlocks its key.
func (a *advisory) Finish(ctx context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := a.rt
	ctx = rt.stmtCtx() // the settlement outlives a cancelled handler, and runs under a deadline
	v = rt.effective(d, v)
	ac := d.ac
	err := func() error {
		if h := d.openTx(); h != nil {
			h.closed = true
			if v.Action == core.ActAck {
				if _, err := rt.finish(ctx, h.tx, d, v, rt.now()); err != nil {
					_ = h.tx.Rollback(ctx)
					return err
				}
				return h.tx.Commit(ctx)
			}
			if err := h.tx.Rollback(ctx); err != nil {
				return err
			}
		}
		if v.Action == core.ActAbandon {
			return nil
		}
		if !rt.needsTx(v) {
			_, err := rt.finish(ctx, ac.c, d, v, rt.now())
			return err
		}
		tx, err := ac.c.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := rt.finish(ctx, tx, d, v, rt.now()); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}()
	switch {
	case err == nil:
		rt.settlementOK(d.id)
	case v.Action != core.ActAbandon:
		// Held back before the key is released, so that no claimant takes it at once.
		until, _ := rt.settlementFailed(d, v, err)
		if ac.c != nil {
			hctx, cancel := rt.background(ctx)
			rt.hold(hctx, ac.c, d, v, err, until)
			cancel()
		}
	}
	a.unlock(ac, d.key)
	if err == nil {
		rt.wakeAfter(v)
	}
	if settled != nil {
		settled(d, v, err)
	}
}

// unlock releases key and frees the connection; a connection that cannot unlock is discarded,
// which releases everything it held.
func (a *advisory) unlock(ac *advConn, key string) {
	if err := a.ad.Unlock(a.rt.stmtCtx(), ac.c, key); err != nil {
		a.rt.log.Warn("sqlqueue: advisory unlock failed; closing the connection to release it", "key", key, "error", err)
		a.discard(ac)
	}
	a.mu.Lock()
	ac.busy = false
	if a.suspect == ac {
		a.suspect = nil
	}
	a.mu.Unlock()
	select {
	case a.released <- struct{}{}:
	default:
	}
}

func (a *advisory) discard(ac *advConn) {
	if ac.c != nil {
		_ = ac.c.Discard()
		ac.c = nil
	}
}

// Close unlocks the rows taken but never handed out and gives the connections back.
func (a *advisory) Close() error {
	for _, d := range a.buf[a.pos:] {
		a.untake(d)
		a.unlock(d.ac, d.key)
	}
	a.buf, a.pos = nil, 0
	a.mu.Lock()
	defer a.mu.Unlock()
	var err error
	for _, ac := range a.conns {
		if ac.c != nil {
			closeConn := ac.c.Close
			if a.rt.lockSession != "" {
				closeConn = ac.c.Discard // its session carries the subscription's lock timeout
			}
			if e := closeConn(); e != nil && err == nil {
				err = e
			}
			ac.c = nil
		}
	}
	a.rt.closeListen()
	return err
}
