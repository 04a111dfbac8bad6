package lease

import (
	"context"
	"sync"

	"github.com/settlehq/settle/core"
)

// giver gives back, at once, the leases of the deliveries claimed but never handed out when the
// subscription stops pulling. Its lock makes concurrent give-backs queue, so that Close returns
// only after the rows the cancelled Next gave back are released.
type giver struct {
	mu sync.Mutex
}

// giveBack releases the leases of the deliveries claimed but never handed out, and hands out
// nothing more.
func (l *Source) giveBack() error {
	l.give.mu.Lock()
	defer l.give.mu.Unlock()
	l.settle.setStopped()
	l.hand.mu.Lock()
	rest, done := l.hand.unhandedLocked()
	l.hand.mu.Unlock()
	done.report() // the claim ahead's settlements: Next may never take them now
	if len(rest) == 0 {
		return nil
	}
	l.busy.Done(len(rest))
	items := make([]item, len(rest))
	for i, d := range rest {
		d.mu.Lock()
		d.finishing = true
		d.mu.Unlock()
		items[i] = item{d: d, v: core.Verdict{Action: core.ActAbandon}}
	}
	ctx, cancel := l.rt.Background(context.Background())
	defer cancel()
	err := l.unclaim(ctx, items)
	if err != nil {
		l.rt.Log.Warn("sqlqueue: releasing the leases of rows claimed but not handed out; they come back when their leases run out",
			"queue", l.rt.Q.Name, "rows", len(items), "error", err)
	}
	for _, it := range items {
		it.d.mu.Lock()
		it.d.settled = true
		it.d.mu.Unlock()
		l.track.forget(it.d)
	}
	l.rt.Wake.Notify() // the rows are ready again
	l.settle.poke()    // what is queued may now be all there is
	return err
}

// unclaim releases the leases of rows claimed but never handed out, and takes back the attempt
// their claim counted: no handler saw them.
func (l *Source) unclaim(ctx context.Context, items []item) error {
	rt := l.rt
	if l.st.unclaim == "" {
		return l.batch.inTx(ctx, items, make([]bool, len(items)), rt.Now(), l.batch.settleEach)
	}
	tx, err := rt.Begin(ctx)
	if err != nil {
		return err
	}
	for _, it := range items {
		undo := l.st.unclaim
		if it.d.uncharged {
			undo = l.st.release // rescued: its claim counted nothing (doClaim)
		}
		if _, err := tx.Exec(ctx, undo, it.d.RowID(), rt.D.Time(it.d.token)); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
	}
	return tx.Commit(ctx)
}
