package rowlock

import (
	"context"
	"sync"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// Source is the row-lock form's source and finisher. A claim selects up to a batch of ready
// rows FOR UPDATE SKIP LOCKED in a transaction that stays open (claimer.go, count.go, ahead.go);
// each delivery's finishing statement runs in it (batch.go), and when every row of the claim is
// finished the transaction commits: that commit is the settlement of all of them. On a dialect
// that allows it (GroupedRowLock), plain acks and drops (no transactional handler, no custom
// event, no PerMessage) wait for that commit and run as one statement for the whole claim, since
// the claim's lock already holds their rows: one round trip instead of one per row. In
// transactional mode the rows of one claim are handed out one at a time, each handler's writes
// behind a savepoint.
type Source struct {
	rt *engine.Runtime
	st *statements

	hand   handout
	cl     claimer
	rescue rescuer
	give   giver
	busy   engine.Unfinished // claimed rows not yet finished; wakes ready when none is left
	ready  chan struct{}     // a claim may hand out its next row (transactional mode)
	out    engine.Outage     // while the database does not answer; Next's
	watch  sync.Once         // stop is armed on the first Next's context
}

var (
	_ core.Source      = (*Source)(nil)
	_ core.Finisher    = (*Source)(nil)
	_ core.DelayHolder = (*Source)(nil)
)

// Reads are the mount options the row-lock form reads; the others are refused when it opens.
const Reads = engine.OptTransactional | engine.OptBatchSize | engine.OptPollInterval | engine.OptCountAtClaim |
	engine.OptPerMessage | engine.OptFlushLimits | engine.OptLockTimeout | engine.OptStatementTimeout | engine.OptOnEvent

// Open opens a row-lock-form subscription of q: it checks the table and renders the statements.
func Open(ctx context.Context, q *engine.Queue, d driver.RowLockDialect, sub core.Subscription, cfg engine.Config) (*Source, error) {
	rt, st, err := prepare(ctx, q, d, sub, cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := rt.Listen(ctx); err != nil {
		return nil, err
	}
	r := &Source{rt: rt, st: st, ready: make(chan struct{}, 1)}
	r.cl.src, r.rescue.src = r, r
	r.cl.count = st.count
	if lc, ok := st.claim.(driver.LockingClaim); ok {
		r.cl.ownLock = lc.LocksClaimedRows()
	}
	r.busy.Idle = r.ready
	r.cl.size.Store(1)
	return r, nil
}

// prepare checks the table (hints: answers the catalogue's questions instead) and renders the
// statements of a row-lock-form subscription of q.
func prepare(ctx context.Context, q *engine.Queue, d driver.RowLockDialect, sub core.Subscription, cfg engine.Config, hints *engine.Hints) (*engine.Runtime, *statements, error) {
	if err := cfg.Refuse(q.Name, driver.FormRowLock, Reads); err != nil {
		return nil, nil, err
	}
	if cfg.PerMessage {
		cfg.Batch = 1 // one row per claim's transaction, as PerMessage says: the size never grows
		cfg.BatchAuto = false
	}
	rt, err := engine.Open(ctx, q, driver.FormRowLock, sub, cfg, hints)
	if err != nil {
		return nil, nil, err
	}
	count := countOf(rt)
	if err := rt.PinClaimIndex(ctx); err != nil {
		return nil, nil, err
	}
	if err := rt.OrderByGroup(ctx); err != nil {
		return nil, nil, err
	}
	st, err := render(rt, d, count)
	return rt, st, err
}

// Statements lists the statements a row-lock-form subscription of q renders, as golden files
// name them, with the catalogue's answers given: nothing is asked of the database.
func Statements(q *engine.Queue, d driver.RowLockDialect, sub core.Subscription, cfg engine.Config, hints engine.Hints) ([]engine.Named, error) {
	rt, st, err := prepare(context.Background(), q, d, sub, cfg, &hints)
	if err != nil {
		return nil, err
	}
	return st.named(rt)
}

// countOf is when the claims of rt count attempts: counting at claim locks the counted rows
// again by id, which needs the dialect's lock clause, and an attempt column; a custom claim
// counts as its SQL likes.
func countOf(rt *engine.Runtime) countMode {
	if rt.S.Attempt == "" || rt.Cfg.Events[engine.EventClaim] != nil || rt.RowLocks == nil {
		return countNever
	}
	switch {
	case rt.Cfg.Count > 0:
		return countAlways
	case rt.Cfg.Count == 0 && rt.Sub.Options.Cap > 0:
		return countRamp
	}
	return countNever
}

// HoldsDelays reports whether a RetryAfter is kept in the row (core.DelayHolder).
func (r *Source) HoldsDelays() bool { return r.rt.HoldsDelays() }

// Next hands out the next row of an open claim, claiming when none is left.
func (r *Source) Next(ctx context.Context) (core.Delivery, error) {
	// Core stops pulling by cancelling this context, and may never call Next again (its
	// workers may all be in handlers): a claim must not wait for rows it will never hand out.
	r.watch.Do(func() { context.AfterFunc(ctx, r.stop) })
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		if d, first := r.hand.next(r.rt.Cfg.Transactional); d != nil {
			if first && r.startAhead(d.b) {
				r.claimAhead(ctx)
			}
			return d, nil
		}
		var woken <-chan struct{}
		var n int
		var err error
		if r.cl.ahead != nil {
			woken, n, err = r.aheadDone()
		} else {
			woken = r.rt.Wake.Wait()
			n, err = r.cl.claim(ctx)
		}
		if r.rt.ConnLost(err) {
			if err := r.rt.AwaitServer(ctx, &r.out, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		r.rt.ServerBack(&r.out)
		if n > 0 {
			continue
		}
		if err := r.rt.WaitReady(ctx, woken, r.ready); err != nil {
			return nil, err
		}
	}
}

// Finish runs d's statement in its claim's transaction; the last row of the claim commits it.
func (r *Source) Finish(_ context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := r.rt
	v = rt.Effective(&d.Delivery, v)
	b := d.b
	b.mu.Lock()
	ctx, own := r.settleLocked(b, d, v)
	b.results = append(b.results, item{d: d, v: v, settled: settled, err: own})
	b.left--
	b.busy = false
	last := b.left == 0
	b.mu.Unlock()
	r.busy.Done(1)
	if last {
		if ctx == nil {
			ctx = rt.StmtCtx()
		}
		r.commit(ctx, b)
	} else if rt.Cfg.Transactional {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}

// stop gives back, at once, the rows of every open claim that were never handed out: they are
// left as they were, and a claim whose handed-out rows have all finished commits now instead of
// when the source closes (which core does only after every settlement, so a claim holding rows
// no worker will take would hold its finished rows' settlements until the shutdown timeout).
func (r *Source) stop() {
	// Close's call waits for the stop's: the claims are ended before the source is closed.
	r.give.mu.Lock()
	defer r.give.mu.Unlock()
	r.giveBack(r.hand.stop())
}

// giveBack ends the hand-out of claims: rows not handed out are left as they were, and a claim
// with nothing else in flight commits (a claim with no finished row rolls back).
func (r *Source) giveBack(bs []*batch) {
	ctx := r.rt.StmtCtx()
	for _, b := range bs {
		b.mu.Lock()
		if r.st.untakeIDs != nil && b.ds[0].counted {
			for i := b.next; i < len(b.ds); i++ {
				b.untake = append(b.untake, b.ds[i].RowID())
			}
		}
		unhanded := len(b.ds) - b.next
		b.left -= unhanded
		b.next = len(b.ds)
		last := b.left == 0
		b.mu.Unlock()
		r.busy.Done(unhanded)
		if last {
			r.commit(ctx, b)
		}
	}
}

// Close gives back the rows claimed but never handed out: they are left as they were, and a
// claim with nothing else in flight rolls back.
func (r *Source) Close() error {
	r.stop()
	r.cl.aheads.Wait() // a claim ahead finds the source stopping and gives its rows back
	r.rt.Close()
	return nil
}

// giver makes concurrent give-backs queue, so that Close returns only after the claims the
// cancelled Next gave back are ended.
type giver struct {
	mu sync.Mutex
}

// handout is the open claims whose rows are not all handed out yet.
type handout struct {
	mu       sync.Mutex
	batches  []*batch
	stopping bool // the subscription stopped pulling: no row is handed out any more
}

// add keeps b for hand-out; false when the subscription stopped pulling meanwhile.
func (h *handout) add(b *batch) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return false
	}
	h.batches = append(h.batches, b)
	return true
}

// next returns the next row of an open claim, if one may go (in transactional mode, one row of
// a claim at a time); first says it is its claim's first.
func (h *handout) next(transactional bool) (d *delivery, first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, b := range h.batches {
		b.mu.Lock()
		if b.busy {
			b.mu.Unlock()
			continue
		}
		d := &b.ds[b.next]
		b.next++
		b.busy = transactional
		if b.next == len(b.ds) {
			h.batches = append(h.batches[:i], h.batches[i+1:]...)
		}
		first := b.next == 1
		b.mu.Unlock()
		return d, first
	}
	return nil, false
}

// stop hands out nothing more and returns the open claims.
func (h *handout) stop() []*batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
	bs := h.batches
	h.batches = nil
	return bs
}

// unlessStopping runs f, under the lock, unless the subscription stopped pulling.
func (h *handout) unlessStopping(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return false
	}
	f()
	return true
}
