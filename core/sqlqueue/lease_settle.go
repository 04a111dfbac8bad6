package sqlqueue

import (
	"context"
	"errors"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// This file is the lease form's grouped settlement: Finish queues finished deliveries, and the
// settler goroutine flushes them (one token-fenced statement per token for acks and drops, the
// others one by one, in one transaction) when a claim's worth has finished, when every claimed
// delivery has and no claim cycle is coming, or after the linger. A claim cycle takes what is
// queued too (lease_claim.go).

// enqueue queues a finished delivery for the settler.
func (l *lease) enqueue(it item) {
	rt := l.rt
	l.qmu.Lock()
	if len(l.queue) == 0 {
		l.queued = rt.clock.Now()
	}
	l.queue = append(l.queue, it)
	n := len(l.queue)
	// Wake the settler only when it has something to decide: a first item when its linger
	// timer is not armed already (to time the linger), or a flush that is due now.
	wake := (n == 1 && !l.timing) || l.flushDueLocked(n)
	l.qmu.Unlock()
	if wake {
		l.poke()
	}
}

// flushDueLocked reports whether the n queued items are to be flushed now rather than after
// the linger; l.qmu is held. A claim's worth is. So is everything claimed, when no claim cycle
// is coming to take it (Next waits for rows, or the subscription stopped pulling); otherwise
// a claimant is about to cycle (every claimed delivery has finished, so the workers are free
// and one of them is in or on its way to Next), and its claim transaction settles them: a
// flush of the settler's own would spend a transaction (a commit, on SQLite a sync and the
// file's write lock) on what the claim does anyway, and race it.
func (l *lease) flushDueLocked(n int) bool {
	l.mu.Lock()
	all := n >= l.outstanding
	l.mu.Unlock()
	if all {
		return l.idle || l.stopped
	}
	limit := min(l.rt.cfg.maxFlush, int(l.size.Load()))
	if l.claiming {
		// A claim ahead runs (lease_ahead.go): the cycle after it takes a claim's worth as soon
		// as the workers have handed out the claim it follows.
		limit *= 2
	}
	return n >= limit
}

// setIdle records whether Next waits for rows; going idle wakes the settler when what is
// queued is due now that no claim cycle is coming.
func (l *lease) setIdle(idle bool) {
	l.qmu.Lock()
	l.idle = idle
	l.unlockAndPokeIfDue()
}

// setStopped records that the subscription stopped pulling (no claim cycle is coming any
// more), and wakes the settler when what is queued is due now.
func (l *lease) setStopped() {
	l.qmu.Lock()
	l.stopped = true
	l.unlockAndPokeIfDue()
}

// unlockAndPokeIfDue releases l.qmu (held by its caller) and wakes the settler when what is queued is due now.
func (l *lease) unlockAndPokeIfDue() {
	due := len(l.queue) > 0 && l.flushDueLocked(len(l.queue))
	l.qmu.Unlock()
	if due {
		l.poke()
	}
}

func (l *lease) poke() {
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// take removes up to a flush's worth of finished items from the queue.
func (l *lease) take() []item {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.popLocked()
}

// popLocked removes up to a flush's worth of items from the front of the queue; l.qmu is held.
// When that is the whole queue, the queue's own array is handed out and the queue goes on in
// the spare one (recycle gives an array back): a claim's worth of items is neither copied
// nor allocated per flush.
func (l *lease) popLocked() []item {
	n := min(len(l.queue), l.rt.cfg.maxFlush)
	if n == 0 {
		return nil
	}
	if n == len(l.queue) {
		items := l.queue
		l.queue, l.spare = l.spare, nil
		return items
	}
	items := make([]item, n)
	copy(items, l.queue)
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	l.queued = l.rt.clock.Now()
	return items
}

// recycle gives back the array of items popLocked handed out, once they are settled and
// reported, for the queue to use next.
func (l *lease) recycle(items []item) {
	if cap(items) == 0 {
		return
	}
	clear(items)
	l.qmu.Lock()
	if l.spare == nil {
		l.spare = items[:0]
	}
	l.qmu.Unlock()
}

// settler flushes finished deliveries; it owns every grouped statement outside a claim cycle.
func (l *lease) settler() {
	defer l.running.Done()
	rt := l.rt
	var linger clock.Timer
	var lingerC <-chan time.Time
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		select {
		case <-l.signal:
		case <-lingerC:
			// The linger of the oldest item queued when the timer was armed is over; a claim
			// cycle may have taken that one since, and the oldest now lingers on.
			lingerC = nil
		case <-l.stop:
			l.flushReady(true)
			return
		}
		wait := l.flushReady(false)
		if wait > 0 {
			if lingerC == nil {
				if linger == nil {
					linger = rt.clock.NewTimer(wait)
				} else {
					linger.Reset(wait)
				}
				lingerC = linger.C()
			}
		} else if lingerC != nil {
			linger.Stop()
			lingerC = nil
		}
	}
}

// flushReady flushes what is queued when it should go now (force: all of it), and otherwise
// returns how long the oldest item may still wait (the settler times it: l.timing).
func (l *lease) flushReady(force bool) time.Duration {
	rt := l.rt
	for {
		l.qmu.Lock()
		n := len(l.queue)
		if n == 0 {
			l.timing = false
			l.qmu.Unlock()
			return 0
		}
		waited := rt.clock.Now().Sub(l.queued)
		if !force && waited < rt.cfg.linger && !l.flushDueLocked(n) {
			l.timing = true
			l.qmu.Unlock()
			return rt.cfg.linger - waited
		}
		items := l.popLocked()
		l.qmu.Unlock()
		l.flush(items, nil)
		l.recycle(items)
		force = false
	}
}

// flush settles items in one transaction. When the group fails (a row lock waited past the
// lock timeout, a trigger refused one statement), each item is settled on its own, so that the
// failure is only its own delivery's.
//
// failed is how a grouped settlement of the same items ended just before (in a claim
// transaction or a pipeline; nil: none was tried). When that, or the group here, may have
// waited out the lock timeout for a row another session holds, the free rows are settled at
// once and the held ones failed (flushFree) instead of waiting for the lock again, once per
// row (InnoDB's timeout runs up to a second over), with every row queued behind it.
func (l *lease) flush(items []item, failed error) {
	rt := l.rt
	ctx, cancel := rt.background(context.Background())
	defer cancel()
	if l.mayBeHeld(failed) && l.flushFree(ctx, items) {
		return
	}
	now := rt.now()
	lost := make([]bool, len(items))
	err := l.flushFast(ctx, items, lost, now)
	if err == errMismatch {
		clear(lost)
		err = l.flushEach(ctx, items, lost, now)
	}
	if l.mayBeHeld(err) && l.flushFree(ctx, items) {
		return
	}
	if err != nil && len(items) > 1 {
		for i := range items {
			one := items[i : i+1]
			lost := []bool{false}
			l.report(one, lost, l.flushEach(ctx, one, lost, rt.now()))
		}
		return
	}
	l.report(items, lost, err)
}

// mayBeHeld reports whether a grouped settlement that failed with err may have waited for a
// row another session holds: a database whose rows lock one by one, and a failure other than
// a row count (a lost lease, which settling each row finds).
func (l *lease) mayBeHeld(err error) bool {
	return err != nil && l.rt.rowLocks != nil && err != errMismatch && !errors.Is(err, ErrRowCount)
}

// flushFree settles, in one transaction, the items whose rows it can lock without waiting, and
// fails the others at once with ErrRowHeld (their settlements are retried like any failed one).
// It reports false, having settled nothing, when it could not tell (a statement failed, or a
// grouped statement matched fewer rows than it names): the caller then settles item by item.
func (l *lease) flushFree(ctx context.Context, items []item) bool {
	rt := l.rt
	tx, err := rt.begin(ctx)
	if err != nil {
		return false
	}
	ds := make([]*delivery, len(items))
	for i, it := range items {
		ds[i] = it.d
	}
	got, err := l.lockRows(ctx, tx, ds, false)
	if err != nil {
		_ = tx.Rollback(ctx)
		return false
	}
	var free, held []item
	for _, it := range items {
		if got[it.d.id] {
			free = append(free, it)
		} else {
			held = append(held, it)
		}
	}
	if len(held) == 0 {
		// Nothing held now: the group failed for another reason (or the holder is gone).
		_ = tx.Rollback(ctx)
		return false
	}
	lost := make([]bool, len(free))
	if err := l.settleIn(ctx, tx, free, lost, rt.now()); err != nil {
		_ = tx.Rollback(ctx)
		return false
	}
	if err := tx.Commit(ctx); err != nil {
		return false
	}
	l.report(free, lost, nil)
	for _, it := range held {
		l.report([]item{it}, nil, &RowHeldError{Queue: rt.q.name, Table: rt.table, ID: it.d.id, Attempt: it.d.attempt})
	}
	return true
}

// report tells core how items were settled: err for all, or per item lost (nil lost: none) or
// done. Each item is recorded as done records it (its outcome kept in its err), then all are
// forgotten under one hold of l.mu, then reported.
func (l *lease) report(items []item, lost []bool, err error) {
	for i := range items {
		it := &items[i]
		it.err = err
		if err == nil && lost != nil && lost[i] {
			it.err = l.lost(it.d)
		}
		if it.err == nil {
			l.rt.wakeAfter(it.v)
		}
		l.record(it.d, it.v, it.err)
	}
	l.mu.Lock()
	for _, it := range items {
		l.forgetLocked(it.d)
	}
	l.mu.Unlock()
	for _, it := range items {
		if it.settled != nil {
			it.settled(it.d, it.v, it.err)
		}
	}
	// Fewer outstanding: what is queued may now be all there is, which flushes at once when no
	// claim cycle is coming.
	l.qmu.Lock()
	l.unlockAndPokeIfDue()
}

type mismatch struct{}

func (mismatch) Error() string {
	return "sqlqueue: grouped settlement matched fewer rows than it settles"
}

var errMismatch error = mismatch{}

// flushFast settles ack and drop with one statement per token; when one matches fewer rows
// than it names, it rolls back and returns errMismatch so that flushEach finds which.
func (l *lease) flushFast(ctx context.Context, items []item, lost []bool, now time.Time) error {
	tx, err := l.rt.begin(ctx)
	if err != nil {
		return err
	}
	if err := l.settleIn(ctx, tx, items, lost, now); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// settleIn runs the grouped settlement of items in tx, neither committing nor rolling back.
func (l *lease) settleIn(ctx context.Context, tx Queryer, items []item, lost []bool, now time.Time) error {
	for _, st := range l.doneSteps(nil, items, now) {
		r, err := tx.Exec(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		if r.RowsAffected != st.Want {
			return errMismatch
		}
	}
	for i, it := range items {
		if isDone(it.v.Action) {
			continue
		}
		ok, err := l.rt.finish(ctx, tx, it.d, it.v, now)
		if err != nil {
			return err
		}
		lost[i] = !ok
	}
	return nil
}

// flushEach settles every item with its own fenced statement, in one transaction.
func (l *lease) flushEach(ctx context.Context, items []item, lost []bool, now time.Time) error {
	tx, err := l.rt.begin(ctx)
	if err != nil {
		return err
	}
	for i, it := range items {
		ok, err := l.rt.finish(ctx, tx, it.d, it.v, now)
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		lost[i] = !ok
	}
	return tx.Commit(ctx)
}

// doneSteps appends to steps the grouped settlement of the ack and drop items, one statement
// per token, each wanting exactly its rows; other items are left out.
func (l *lease) doneSteps(steps []Step, items []item, now time.Time) []Step {
	rt := l.rt
	handled := make([]bool, len(items))
	for i, it := range items {
		if handled[i] || !isDone(it.v.Action) {
			continue
		}
		tok := it.d.token
		args := make([]any, 0, 2+len(items)-i)
		if rt.st.doneMark {
			args = append(args, rt.d.Time(now))
		}
		args = append(args, rt.d.Time(tok))
		ids := 0
		for j := i; j < len(items); j++ {
			if !handled[j] && isDone(items[j].v.Action) && items[j].d.token.Equal(tok) {
				handled[j] = true
				args = append(args, items[j].d.id)
				ids++
			}
		}
		steps = append(steps, Step{SQL: rt.st.doneMany.SQL(ids), Args: args, Want: int64(ids)})
	}
	return steps
}

func isDone(a core.Action) bool { return a == core.ActAck || a == core.ActDrop }
