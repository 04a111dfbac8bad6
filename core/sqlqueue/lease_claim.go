package sqlqueue

import (
	"context"
	"errors"
	"time"

	"github.com/settlehq/settle/core/batching"
)

// This file is the lease form's claiming: a cycle settles what has finished and claims the
// next batch in one transaction (one pipeline on a Pipeliner).

// flushAndClaim settles what has finished and claims the next batch in one transaction: one
// commit instead of two, and the claim finds the settled rows gone instead of stepping over
// their leases. When the settlement cannot share the claim's transaction (a lease lost in the
// group, an error), it is flushed on its own first.
func (l *lease) flushAndClaim(ctx context.Context) (*leaseBatch, cycleDone, error) {
	items := l.take()
	if len(items) == 0 {
		b, err := l.claim(ctx)
		return b, cycleDone{}, err
	}
	rt := l.rt
	// The settlements must not be rolled back by a cancelled claim context, and must not wait
	// forever.
	sctx, cancel := rt.background(ctx)
	defer cancel()
	if b, done, ok, err := l.pipelined(sctx, items); ok {
		return b, done, err
	}
	tx, err := rt.begin(sctx)
	if err != nil {
		l.flush(items, nil)
		l.recycle(items)
		return nil, cycleDone{}, err
	}
	lost := make([]bool, len(items))
	if err := l.settleIn(sctx, tx, items, lost, rt.now()); err != nil {
		_ = tx.Rollback(sctx)
		l.flush(items, err)
		l.recycle(items)
		b, err := l.claim(ctx)
		return b, cycleDone{}, err
	}
	p := l.params(rt.now())
	rows, err := l.doClaim(sctx, tx, p, l.claimBuf[:0])
	if err != nil {
		_ = tx.Rollback(sctx)
		l.flush(items, nil)
		l.recycle(items)
		return nil, cycleDone{}, err
	}
	if err := tx.Commit(sctx); err != nil {
		l.report(items, lost, err)
		l.recycle(items)
		return nil, cycleDone{}, err
	}
	return l.track(rows, p), cycleDone{l: l, items: items, lost: lost}, nil
}

// cycleDone is the settlements a claim cycle committed with its claim, to be reported (and
// their items recycled) once the claim is handed over.
type cycleDone struct {
	l     *lease
	items []item
	lost  []bool // nil: none lost
}

func (c cycleDone) report() {
	if c.l == nil {
		return
	}
	c.l.report(c.items, c.lost, nil)
	c.l.recycle(c.items)
}

// pipelined settles items and claims the next batch through the DB's Pipeliner: one round
// trip and one commit. It applies when the DB pipelines, the claim is one statement and every
// item is an ack or drop; ok is false when it does not apply. When a grouped statement matches
// fewer rows than it names (a lease lost in the group), nothing was committed: the items are
// flushed on their own, which finds the lost one, and the claim runs by itself. Any other
// failure (a row lock waited past the lock timeout) flushes them on their own too, so that it
// fails only the delivery it concerns.
func (l *lease) pipelined(ctx context.Context, items []item) (b *leaseBatch, done cycleDone, ok bool, err error) {
	rt := l.rt
	if l.pipe == nil || l.lapsed {
		return nil, cycleDone{}, false, nil
	}
	for _, it := range items {
		if !isDone(it.v.Action) {
			return nil, cycleDone{}, false, nil
		}
	}
	p := l.params(rt.now())
	var steps []Step
	if rt.lockTx != "" {
		steps = append(steps, Step{SQL: rt.lockTx})
	}
	steps = l.doneSteps(steps, items, p.Now)
	rows := l.claimBuf[:0]
	steps = append(steps, l.pipeClaim.ClaimStep(p, &rows))
	err = l.pipe.Pipeline(ctx, steps)
	if err == nil {
		return l.track(rows, p), cycleDone{l: l, items: items}, true, nil
	}
	if !errors.Is(err, ErrRowCount) {
		rt.log.Warn("sqlqueue: a pipelined settle-and-claim failed; settling its deliveries on their own",
			"queue", rt.q.name, "deliveries", len(items), "error", err)
	}
	l.flush(items, err)
	l.recycle(items)
	b, err = l.claim(ctx)
	return b, cycleDone{}, true, err
}

// claim claims a batch and tracks it; nil when no row is ready.
func (l *lease) claim(ctx context.Context) (*leaseBatch, error) {
	rt := l.rt
	p := l.params(rt.now())
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := l.doClaim(ctx, tx, p, l.claimBuf[:0])
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return l.track(rows, p), nil
}

// params are the values of a claim at now: a fresh token a lease ahead; one row when the
// claim rescues lapsed rows.
func (l *lease) params(now time.Time) ClaimParams {
	rt := l.rt
	limit := rt.cfg.batch
	if rt.cfg.batchAuto {
		limit = int(l.size.Load())
	}
	if l.lapsed {
		limit = 1
	}
	return ClaimParams{Now: now, Token: rt.nextToken(now.Add(rt.cfg.lease)), Limit: limit, Group: rt.q.group}
}

// doClaim runs the claim: the rescue claim of a lapsed row, or the ordinary one.
//
// A rescue claim takes back, in its transaction, the attempt the claim statement counted: a
// rescued row is counted as its handler starts (the delivery's Charge, lease_rescue.go), so
// that a process that dies between the rescue and the handler charges it nothing. A row lapsed in a crash
// would otherwise be charged by every crash that came before its handler, and could reach the
// cap with one run of its handler.
func (l *lease) doClaim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	if !l.lapsed {
		return l.rt.doClaim(ctx, tx, p, dst)
	}
	rows, err := l.rt.rescue.Claim(ctx, tx, p, dst)
	if err != nil || l.rt.st.uncharge == "" {
		return rows, err
	}
	for _, r := range rows {
		if _, err := tx.Exec(ctx, l.rt.st.uncharge, r.ID, l.rt.d.Time(p.Token)); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// batchCycle is how long the automatic claim size (no BatchSize) lets the workers take to get
// through a claim before it stops growing (package batching has the rule both forms size their
// claims by): fast handlers then share one claim's transaction among up to DefaultMaxBatch rows
// after a few claims; slow ones keep no more rows claimed than they get through in about this
// long. A claim got through in under it may also be claimed ahead (lease_ahead.go).
const batchCycle = batching.Cycle

// maxBaseBatch caps the base claim size (10 rows per worker) when no BatchSize is given.
const maxBaseBatch = 100

// sized is the automatic claim size after a claim of size cur (at least base, at most ceiling)
// that came back full or not and took took.
func sized(cur, base, ceiling int32, full bool, took time.Duration) int32 {
	return int32(batching.Next(int(cur), int(base), int(ceiling), full, took))
}

// adapt sets the automatic claim size after a claim of limit rows returned got, at now: sized
// by the time since the previous claim (how long the workers took to get through it), and
// halved when the claim came back less than half full. A process's first claim has no earlier
// one to time.
func (l *lease) adapt(got, limit int, now time.Time) {
	rt := l.rt
	l.mayAhead = false
	if !rt.cfg.batchAuto || l.lapsed {
		return
	}
	cycle := now.Sub(l.lastClaim)
	first := l.lastClaim.IsZero()
	l.lastClaim = now
	size, base := l.size.Load(), int32(rt.cfg.batch)
	switch {
	case got < limit/2:
		l.size.Store(max(size/2, base))
	case first:
		// No earlier claim to time the workers by: a full first claim doubles the next, the
		// least a full fast claim grows it.
		if got == limit {
			l.size.Store(min(size*2, int32(rt.cfg.batchMax)))
		}
	default:
		l.size.Store(sized(size, base, int32(rt.cfg.batchMax), got == limit, cycle))
		// Full, and got through fast: the next claim may run ahead of the workers.
		l.mayAhead = got == limit && cycle < batchCycle
	}
}
