package lease

import (
	"context"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// alone is the completion strategy of a delivery settled in a transaction of its own as it
// finishes: with PerMessage, for a custom event (the service's statements run per delivery), and
// for a handler that wrote through its delivery's transaction, which an ack commits together
// with the settlement. Every other delivery is queued for the settler (settler.go), whose flushes
// and the claim cycles settle them in groups (completer_batch.go, completer_claim.go).
type alone struct{ src *Source }

// takes reports whether the settlement of v for d goes alone rather than into a group.
func (a alone) takes(d *delivery, v core.Verdict) bool {
	rt := a.src.rt
	return rt.Cfg.PerMessage || rt.EventFor(v.Action) != nil || d.OpenTx() != nil
}

// complete settles d alone: in the handler's transaction for an ack (which commits its writes
// with the settlement), otherwise, the handler's writes rolled back, in a transaction of its own.
func (a alone) complete(ctx context.Context, d *delivery, v core.Verdict, settled core.Settled) {
	l, rt := a.src, a.src.rt
	if h := d.OpenTx(); h != nil {
		h.Close()
		if v.Action == core.ActAck {
			a.commit(ctx, d, h.Tx(), v, settled)
			return
		}
		if err := h.Tx().Rollback(ctx); err != nil {
			rt.Log.Warn("sqlqueue: rolling back the handler's transaction", "queue", rt.Q.Name, "message_id", d.ID(), "attempt", d.Attempt(), "error", err)
		}
		if !rt.Cfg.PerMessage && rt.EventFor(v.Action) == nil {
			l.settle.enqueue(item{d: d, v: v, settled: settled})
			return
		}
	}
	tx, err := rt.Begin(ctx)
	if err != nil {
		l.done(d, v, err, settled)
		return
	}
	a.commit(ctx, d, tx, v, settled)
}

// commit runs d's statement in tx and commits; no matching row rolls back with ErrLeaseLost.
func (a alone) commit(ctx context.Context, d *delivery, tx driver.Transaction, v core.Verdict, settled core.Settled) {
	l, rt := a.src, a.src.rt
	d.mu.Lock()
	ok, err := l.settleOne(ctx, tx, d, v, rt.Now())
	switch {
	case err != nil:
		_ = tx.Rollback(ctx)
	case !ok:
		_ = tx.Rollback(ctx)
		err = l.lost(d)
	default:
		err = tx.Commit(ctx)
	}
	d.mu.Unlock()
	if err == nil {
		rt.WakeAfter(v)
	}
	l.done(d, v, err, settled)
	l.settle.poke() // one fewer outstanding: what is queued may now be all there is
}
