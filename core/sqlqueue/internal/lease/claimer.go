package lease

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/batching"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// claimer is the lease form's claiming: a cycle settles what has finished and claims the next
// batch in one transaction (the claim completer, completer_claim.go), and the claim is sized and
// tracked here. Cycles run in Next (core never calls it concurrently) or in the claimer
// goroutine running ahead of the workers (ahead.go), never in both at once: its state needs no
// lock, except the size, which the settler reads.
type claimer struct {
	src *Source
	buf []driver.Claimed // the rows of a claim, reused from claim to claim
	// size is the automatic claim size (no BatchSize; adapt), lastClaim when the last claim was
	// made, and mayAhead whether it came back full and fast, so that the next may run ahead.
	size      atomic.Int32
	lastClaim time.Time
	mayAhead  bool
}

// cycle settles what has finished and claims: a lapsed row when one is due to be rescued
// (rescue.go), otherwise, or when there is none, the next batch.
//
// The settlements the claim's transaction committed are reported by the cycleDone it returns,
// which the caller runs once it has handed the claim over: a claim ahead (ahead.go) lets the
// workers have the next claim before it tells core about the last one's settlements.
func (c *claimer) cycle(ctx context.Context) (*batch, cycleDone, error) {
	l := c.src
	if err := l.rescue.due(ctx); err != nil {
		return nil, cycleDone{}, err
	}
	if !l.rescue.lapsed {
		return l.inClaim.flushAndClaim(ctx)
	}
	b, done, err := l.inClaim.flushAndClaim(ctx)
	done.report()
	l.rescue.lapsed = false
	if err != nil {
		return nil, cycleDone{}, err
	}
	l.rescue.rescued(b)
	if b != nil {
		return b, cycleDone{}, nil
	}
	return l.inClaim.flushAndClaim(ctx)
}

// claim claims a batch in a transaction of its own and tracks it; nil when no row is ready.
func (c *claimer) claim(ctx context.Context) (*batch, error) {
	rt := c.src.rt
	p := c.params(rt.Now())
	tx, err := rt.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.doClaim(ctx, tx, p, c.buf[:0])
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return c.track(rows, p), nil
}

// params are the values of a claim at now: a fresh token a lease ahead; one row when the claim
// rescues lapsed rows.
func (c *claimer) params(now time.Time) driver.ClaimParams {
	l, rt := c.src, c.src.rt
	limit := rt.Cfg.Batch
	if rt.Cfg.BatchAuto {
		limit = int(c.size.Load())
	}
	if l.rescue.lapsed {
		limit = 1
	}
	return driver.ClaimParams{Now: now, Token: l.tokens.next(now.Add(rt.Cfg.Lease)), Limit: limit, Group: rt.Q.Group}
}

// doClaim runs the claim: the rescue claim of a lapsed row, or the ordinary one.
//
// A rescue claim takes back, in its transaction, the attempt the claim statement counted: a
// rescued row is counted as its handler starts (the delivery's Charge), so that a process that
// dies between the rescue and the handler charges it nothing. A row lapsed in a crash would
// otherwise be charged by every crash that came before its handler, and could reach the cap with
// one run of its handler.
func (c *claimer) doClaim(ctx context.Context, tx driver.Queryer, p driver.ClaimParams, dst []driver.Claimed) ([]driver.Claimed, error) {
	l, rt := c.src, c.src.rt
	if !l.rescue.lapsed {
		return rt.Claim(ctx, l.st.claim, tx, p, dst)
	}
	rows, err := l.st.rescue.Claim(ctx, tx, p, dst)
	if err != nil || l.st.uncharge == "" {
		return rows, err
	}
	for _, r := range rows {
		if _, err := tx.Exec(ctx, l.st.uncharge, r.ID, rt.D.Time(p.Token)); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// track makes the deliveries of claimed rows and keeps them for extension; nil for no rows.
func (c *claimer) track(rows []driver.Claimed, p driver.ClaimParams) *batch {
	l := c.src
	token := p.Token
	c.buf = rows[:0]
	c.adapt(len(rows), p.Limit, p.Now)
	if len(rows) == 0 {
		l.tokens.unspend(token)
		return nil
	}
	b := &batch{src: l, left: len(rows)}
	b.ds = newDeliveries(l.rt, rows, token, b)
	clear(rows)
	l.track.add(b)
	l.busy.Add(len(b.ds))
	return b
}

// batchCycle is how long the automatic claim size (no BatchSize) lets the workers take to get
// through a claim before it stops growing (package batching has the rule both forms size their
// claims by): fast handlers then share one claim's transaction among up to DefaultMaxBatch rows
// after a few claims; slow ones keep no more rows claimed than they get through in about this
// long. A claim got through in under it may also be claimed ahead (ahead.go).
const batchCycle = batching.Cycle

// adapt sets the automatic claim size after a claim of limit rows returned got, at now: sized
// by the time since the previous claim (how long the workers took to get through it), and halved
// when the claim came back less than half full. A process's first claim has no earlier one to
// time.
func (c *claimer) adapt(got, limit int, now time.Time) {
	l, rt := c.src, c.src.rt
	c.mayAhead = false
	if !rt.Cfg.BatchAuto || l.rescue.lapsed {
		return
	}
	cycle := now.Sub(c.lastClaim)
	first := c.lastClaim.IsZero()
	c.lastClaim = now
	size, base := c.size.Load(), int32(rt.Cfg.Batch)
	switch {
	case got < limit/2:
		c.size.Store(max(size/2, base))
	case first:
		// No earlier claim to time the workers by: a full first claim doubles the next, the
		// least a full fast claim grows it.
		if got == limit {
			c.size.Store(min(size*2, int32(rt.Cfg.BatchMax)))
		}
	default:
		c.size.Store(int32(batching.Next(int(size), int(base), rt.Cfg.BatchMax, got == limit, cycle)))
		// Full, and got through fast: the next claim may run ahead of the workers.
		c.mayAhead = got == limit && cycle < batchCycle
	}
}
