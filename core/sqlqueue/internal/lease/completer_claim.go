package lease

import (
	"context"
	"errors"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// withClaim is the completion strategy of finished deliveries settled in the transaction of the
// next claim: one commit instead of two, and the claim finds the settled rows gone instead of
// stepping over their leases. On a Pipeliner, when the claim is one statement and every
// settlement an ack or drop, the settlements and the claim go as one pipeline: one round trip
// and one commit. When the settlement cannot share the claim's transaction (a lease lost in the
// group, an error), the grouped completer settles it on its own first.
type withClaim struct {
	src *Source
	// pipe and step are set when a cycle can go as one pipeline: the DB pipelines and the claim
	// is one statement of the engine's own.
	pipe driver.Pipeliner
	step driver.StepClaim
}

// cycleDone is the settlements a claim cycle committed with its claim, to be reported (and
// their items recycled) once the claim is handed over.
type cycleDone struct {
	l     *Source
	items []item
	lost  []bool // nil: none lost
}

func (c cycleDone) report() {
	if c.l == nil {
		return
	}
	c.l.report(c.items, c.lost, nil)
	c.l.settle.recycle(c.items)
}

// flushAndClaim settles what has finished (taken from the settler's queue) and claims the next
// batch in one transaction.
func (w withClaim) flushAndClaim(ctx context.Context) (*batch, cycleDone, error) {
	l, rt := w.src, w.src.rt
	items := l.settle.take()
	if len(items) == 0 {
		b, err := l.cl.claim(ctx)
		return b, cycleDone{}, err
	}
	// The settlements must not be rolled back by a cancelled claim context, and must not wait
	// forever.
	sctx, cancel := rt.Background(ctx)
	defer cancel()
	if b, done, ok, err := w.pipelined(sctx, items); ok {
		return b, done, err
	}
	tx, err := rt.Begin(sctx)
	if err != nil {
		w.fallBack(items, nil)
		return nil, cycleDone{}, err
	}
	lost := make([]bool, len(items))
	if err := l.batch.settleIn(sctx, tx, items, lost, rt.Now()); err != nil {
		_ = tx.Rollback(sctx)
		w.fallBack(items, err)
		b, err := l.cl.claim(ctx)
		return b, cycleDone{}, err
	}
	p := l.cl.params(rt.Now())
	rows, err := l.cl.doClaim(sctx, tx, p, l.cl.buf[:0])
	if err != nil {
		_ = tx.Rollback(sctx)
		w.fallBack(items, nil)
		return nil, cycleDone{}, err
	}
	if err := tx.Commit(sctx); err != nil {
		l.report(items, lost, err)
		l.settle.recycle(items)
		return nil, cycleDone{}, err
	}
	return l.cl.track(rows, p), cycleDone{l: l, items: items, lost: lost}, nil
}

// fallBack settles items in a transaction of their own (the grouped completer), after the claim
// cycle that took them could not (failed: how their settlement in it ended, nil if not tried).
func (w withClaim) fallBack(items []item, failed error) {
	w.src.batch.flush(items, failed)
	w.src.settle.recycle(items)
}

// pipelined settles items and claims the next batch through the DB's Pipeliner: one round trip
// and one commit. It applies when the DB pipelines, the claim is one statement and every item is
// an ack or drop; ok is false when it does not apply. When a grouped statement matches fewer
// rows than it names (a lease lost in the group), nothing was committed: the items are flushed
// on their own, which finds the lost one, and the claim runs by itself. Any other failure (a row
// lock waited past the lock timeout) flushes them on their own too, so that it fails only the
// delivery it concerns.
func (w withClaim) pipelined(ctx context.Context, items []item) (b *batch, done cycleDone, ok bool, err error) {
	l, rt := w.src, w.src.rt
	if w.pipe == nil || l.rescue.lapsed {
		return nil, cycleDone{}, false, nil
	}
	for _, it := range items {
		if !isDone(it.v.Action) {
			return nil, cycleDone{}, false, nil
		}
	}
	p := l.cl.params(rt.Now())
	var steps []driver.Step
	if rt.LockTx != "" {
		steps = append(steps, driver.Step{SQL: rt.LockTx})
	}
	steps = l.batch.doneSteps(steps, items, p.Now)
	rows := l.cl.buf[:0]
	steps = append(steps, w.step.ClaimStep(p, &rows))
	err = w.pipe.Pipeline(ctx, steps)
	if err == nil {
		return l.cl.track(rows, p), cycleDone{l: l, items: items}, true, nil
	}
	if !errors.Is(err, driver.ErrRowCount) {
		rt.Log.Warn("sqlqueue: a pipelined settle-and-claim failed; settling its deliveries on their own",
			"queue", rt.Q.Name, "deliveries", len(items), "error", err)
	}
	w.fallBack(items, err)
	b, err = l.cl.claim(ctx)
	return b, cycleDone{}, true, err
}
