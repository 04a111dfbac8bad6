package sqlqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
)

// rowLock is the row-lock form's source and finisher. A claim selects up to a batch of ready
// rows FOR UPDATE SKIP LOCKED in a transaction that stays open; each delivery's finishing
// statement runs in it, and when every row of the claim is finished the transaction commits:
// that commit is the settlement of all of them. On a dialect that allows it (GroupedRowLock),
// plain acks and drops (no transactional handler, no custom event, no PerMessage) wait for that
// commit and run as one statement for the whole claim, since the claim's lock already holds
// their rows: one round trip instead of one per row. In transactional mode the rows of one claim are
// handed out one at a time, each handler's writes behind a savepoint.
type rowLock struct {
	rt       *runtime
	group    bool              // the dialect settles a claim's acks and drops with one statement
	byIDs    GroupedRowLockSQL // the dialect spells that statement (nil: rt.st.doneIDs) …
	byIDsSQL sqltext.ByCount   // … once per number of ids
	byArray  string            // or spells it with the ids as one array (GroupedRowLockArray)
	claimBuf []Claimed
	ownLock  bool          // the claim is the engine's own, and locks the rows it takes (settleGrouped)
	ready    chan struct{} // a batch may hand out its next row (transactional mode)
	out      outage        // while the database does not answer

	// size is how many rows the next claim takes: it starts at one and doubles with every
	// claim that commits cleanly, up to BatchSize, and halves with every claim that fails or
	// gives rows back abandoned (rowlock_claim.go).
	size atomic.Int32

	// claiming ahead (rowlock_ahead.go): mayAhead is set as claims end, ahead by Next
	mayAhead atomic.Bool
	ahead    chan claimResult // the claim ahead's outcome; nil when none runs
	aheads   sync.WaitGroup   // the claim ahead, while it runs

	// the rescue of lapsed claims (rowlock_rescue.go); rescuing and rescueBy are Next's only
	rescuing bool
	rescueBy time.Time

	mu       sync.Mutex
	busy     unfinished // claimed rows not yet finished; wakes ready when none is left
	rescueAt time.Time  // when to look for lapsed rows again
	batches  []*rlBatch // batches with rows not yet handed out
	stopping bool       // the subscription stopped pulling: no row is handed out any more
	watch    sync.Once  // stop is armed on the first Next's context
	giving   sync.Mutex // held while stop gives claims back
}

type rlBatch struct {
	tx      Transaction
	ds      []delivery
	next    int // next row to hand out
	mu      sync.Mutex
	left    int  // rows not yet finished
	busy    bool // transactional mode: a row is with a handler
	failed  error
	culprit *delivery // whose statement failed the claim
	results []item
	untake  []any     // counted rows given back unhanded: their count and mark are taken back
	at      time.Time // when it was claimed
	full    bool      // it took as many rows as it asked for
}

func newRowLock(rt *runtime) *rowLock {
	g, ok := rt.d.(GroupedRowLock)
	r := &rowLock{rt: rt, group: ok && g.GroupRowLockSettlements(), ready: make(chan struct{}, 1)}
	if lc, ok := rt.claim.(driver.LockingClaim); ok {
		r.ownLock = lc.LocksClaimedRows()
	}
	if ga, ok := rt.d.(GroupedRowLockArray); ok && r.group {
		mark := ""
		if rt.st.doneMark {
			mark = rt.s.ProcessedAt
		}
		r.byArray = ga.SettleByIDArray(rt.s.QTable, rt.s.ID, mark)
	}
	if gs, ok := rt.d.(GroupedRowLockSQL); ok && r.group && r.byArray == "" {
		r.byIDs = gs
	}
	r.busy.idle = r.ready
	r.size.Store(1)
	return r
}

func (r *rowLock) Next(ctx context.Context) (core.Delivery, error) {
	// Core stops pulling by cancelling this context, and may never call Next again (its
	// workers may all be in handlers): a claim must not wait for rows it will never hand out.
	r.watch.Do(func() { context.AfterFunc(ctx, r.stop) })
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		if d, first := r.handOut(); d != nil {
			if first && r.startAhead(d.rb) {
				r.claimAhead(ctx)
			}
			return d, nil
		}
		var woken <-chan struct{}
		var n int
		var err error
		if r.ahead != nil {
			woken, n, err = r.aheadDone()
		} else {
			woken = r.rt.wake.wait()
			n, err = r.claim(ctx)
		}
		if r.rt.connLost(err) {
			if err := r.rt.awaitServer(ctx, &r.out, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		r.rt.serverBack(&r.out)
		if n > 0 {
			continue
		}
		if err := r.rt.waitReady(ctx, woken, r.ready); err != nil {
			return nil, err
		}
	}
}

// handOut returns the next row of an open batch, if one may go; first says it is its batch's
// first.
func (r *rowLock) handOut() (d *delivery, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, b := range r.batches {
		b.mu.Lock()
		if b.busy {
			b.mu.Unlock()
			continue
		}
		d := &b.ds[b.next]
		b.next++
		b.busy = r.rt.cfg.transactional
		if b.next == len(b.ds) {
			r.batches = append(r.batches[:i], r.batches[i+1:]...)
		}
		first := b.next == 1
		b.mu.Unlock()
		return d, first
	}
	return nil, false
}

// stop gives back, at once, the rows of every open claim that were never handed out: they are
// left as they were, and a claim whose handed-out rows have all finished commits now instead
// of when the source closes (which core does only after every settlement, so a claim holding
// rows no worker will take would hold its finished rows' settlements until the shutdown
// timeout).
func (r *rowLock) stop() {
	// Close's call waits for the stop's: the claims are ended before the source is closed.
	r.giving.Lock()
	defer r.giving.Unlock()
	r.mu.Lock()
	r.stopping = true
	bs := r.batches
	r.batches = nil
	r.mu.Unlock()
	r.giveBack(bs)
}

// giveBack ends the hand-out of batches: rows not handed out are left as they were, and a
// batch with nothing else in flight commits (a claim with no finished row rolls back).
func (r *rowLock) giveBack(bs []*rlBatch) {
	ctx := r.rt.stmtCtx()
	for _, b := range bs {
		b.mu.Lock()
		if r.rt.st.untakeIDs != nil && b.ds[0].counted {
			for i := b.next; i < len(b.ds); i++ {
				b.untake = append(b.untake, b.ds[i].id)
			}
		}
		unhanded := len(b.ds) - b.next
		b.left -= unhanded
		b.next = len(b.ds)
		last := b.left == 0
		b.mu.Unlock()
		r.busy.done(unhanded)
		if last {
			r.commit(ctx, b)
		}
	}
}

// Finish runs d's statement in its claim's transaction; the last row of the claim commits it.
func (r *rowLock) Finish(_ context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := r.rt
	v = rt.effective(d, v)
	b := d.rb
	// Statements run under a statement context (the settlement outlives a cancelled handler,
	// and runs under a deadline), taken only where one runs: a grouped ack or drop runs none
	// before its claim's last row.
	var ctx context.Context
	b.mu.Lock()
	h := d.openTx()
	if h != nil || (b.failed == nil && !r.grouped(v)) {
		ctx = rt.stmtCtx()
	}
	if h != nil {
		h.closed = true
		if b.failed == nil {
			sp := "RELEASE SAVEPOINT settle_delivery"
			if v.Action != core.ActAck {
				sp = "ROLLBACK TO SAVEPOINT settle_delivery"
			}
			if _, err := b.tx.Exec(ctx, sp); err != nil {
				b.failed, b.culprit = err, d
			} else if v.Action != core.ActAck {
				if _, err := b.tx.Exec(ctx, "RELEASE SAVEPOINT settle_delivery"); err != nil {
					b.failed, b.culprit = err, d
				}
			}
		}
	}
	var own error
	switch {
	case b.failed != nil || r.grouped(v):
	case rt.eventFor(v.Action) != nil:
		own, b.failed = r.isolated(ctx, b, d, v)
		if b.failed != nil {
			b.culprit = d
		}
	default:
		if _, err := rt.finish(ctx, b.tx, d, v, rt.now()); err != nil {
			b.failed, b.culprit = err, d
		}
	}
	b.results = append(b.results, item{d: d, v: v, settled: settled, err: own})
	b.left--
	b.busy = false
	last := b.left == 0
	b.mu.Unlock()
	r.busy.done(1)
	if last {
		if ctx == nil {
			ctx = rt.stmtCtx()
		}
		r.commit(ctx, b)
	} else if rt.cfg.transactional {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}

// isolated runs a custom event's statements behind a savepoint: the service's own SQL may fail
// for one row, and that must not roll back the settlements of the rest of the claim. A failed
// event is undone to the savepoint and reported for its delivery alone (own); its row is left
// as it was and comes back after the claim commits. fatal is set when the savepoint itself
// fails, which fails the whole claim.
func (r *rowLock) isolated(ctx context.Context, b *rlBatch, d *delivery, v core.Verdict) (own, fatal error) {
	if _, err := b.tx.Exec(ctx, "SAVEPOINT settle_event"); err != nil {
		return nil, err
	}
	if _, err := r.rt.finish(ctx, b.tx, d, v, r.rt.now()); err != nil {
		if _, rerr := b.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT settle_event"); rerr != nil {
			return nil, rerr
		}
		own = err
		// The row is held back in the claim's own transaction: its lock is not released
		// before the hold is in it, so no other claim takes it at once.
		until, _ := r.rt.settlementFailed(d, v, own)
		if !r.rt.hold(ctx, b.tx, d, v, own, until) {
			if _, rerr := b.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT settle_event"); rerr != nil {
				return nil, rerr
			}
		}
	}
	if _, err := b.tx.Exec(ctx, "RELEASE SAVEPOINT settle_event"); err != nil {
		return nil, err
	}
	return own, nil
}

// grouped reports whether v's statement waits for the claim's commit, to run as one statement
// with the others' (see rowLock).
func (r *rowLock) grouped(v core.Verdict) bool {
	cfg := &r.rt.cfg
	return r.group && isDone(v.Action) && !cfg.transactional && !cfg.perMessage && r.rt.eventFor(v.Action) == nil
}

// settleGrouped runs the grouped acks and drops of a finished claim in its transaction: their
// ids in ascending order, at most the flush size per statement, each statement matching every
// row it names. With commit, on a PipelinedTx, the last statement goes with the claim's COMMIT
// in one round trip (its row count checked on the server before the commit): ended then says
// that the transaction has ended, committed unless err says otherwise.
func (r *rowLock) settleGrouped(ctx context.Context, b *rlBatch, commit bool) (ended bool, err error) {
	rt := r.rt
	ids := make([]int64, 0, len(b.results))
	for _, it := range b.results {
		if r.grouped(it.v) {
			ids = append(ids, it.d.id)
		}
	}
	slices.Sort(ids)
	pt, pipelined := b.tx.(PipelinedTx)
	for i := 0; i < len(ids); i += rt.cfg.maxFlush {
		part := ids[i:min(i+rt.cfg.maxFlush, len(ids))]
		sql, args := r.groupedStatement(part)
		if commit && pipelined && i+len(part) == len(ids) {
			// The statement's row count is checked on the server, before the COMMIT, unless
			// the engine's own claim (not a counted relock) holds every row it names locked:
			// no other session can have changed or deleted them, so it changes each one, and
			// the check (a CTE over RETURNING, about a fifth of the DELETE's time on
			// PostgreSQL) proves nothing.
			want := int64(len(part))
			if r.ownLock && !b.ds[0].counted {
				want = 0
			}
			if err := pt.CommitWith(ctx, Step{SQL: sql, Args: args, Want: want}); err != nil {
				return true, fmt.Errorf("sqlqueue: queue %q on table %s: settling %d claimed rows: %w", rt.q.name, rt.table, len(part), err)
			}
			return true, nil
		}
		res, err := b.tx.Exec(ctx, sql, args...)
		if err == nil && res.RowsAffected != int64(len(part)) {
			err = fmt.Errorf("sqlqueue: queue %q on table %s: settling %d claimed rows matched %d", rt.q.name, rt.table, len(part), res.RowsAffected)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// groupedStatement is the statement that settles ids, with its arguments: the dialect's own
// (GroupedRowLockSQL: the ids, then the time where the table marks processed_at; or
// GroupedRowLockArray: the ids as one array, then the time), or the engine's IN-list (the time,
// then the ids).
func (r *rowLock) groupedStatement(ids []int64) (string, []any) {
	rt := r.rt
	args := make([]any, 0, len(ids)+1)
	switch {
	case r.byIDs != nil:
		for _, id := range ids {
			args = append(args, id)
		}
		if rt.st.doneMark {
			args = append(args, rt.d.Time(rt.now()))
		}
		return r.byIDsSQL.Get(len(ids), func(n int) string {
			return r.byIDs.SettleByIDs(rt.s.QTable, rt.s.ID, rt.s.ProcessedAt, n)
		}), args
	case r.byArray != "":
		args = append(args, ids)
		if rt.st.doneMark {
			args = append(args, rt.d.Time(rt.now()))
		}
		return r.byArray, args
	}
	if rt.st.doneMark {
		args = append(args, rt.d.Time(rt.now()))
	}
	for _, id := range ids {
		args = append(args, id)
	}
	return rt.st.doneIDs.SQL(len(ids)), args
}

// commit ends a batch whose rows are all finished and reports every settlement.
func (r *rowLock) commit(ctx context.Context, b *rlBatch) {
	err := b.failed
	ended := false
	if err == nil {
		ended, err = r.settleGrouped(ctx, b, len(b.untake) == 0)
	}
	if err == nil && len(b.untake) > 0 {
		_, err = b.tx.Exec(ctx, r.rt.st.untakeIDs.SQL(len(b.untake)), b.untake...)
	}
	switch {
	case ended:
	case err == nil:
		err = b.tx.Commit(ctx)
	default:
		_ = b.tx.Rollback(ctx)
	}
	if err != nil && b.culprit == nil && len(b.results) == 1 {
		b.culprit = b.results[0].d // a claim of one row that fails is that row's failure
	}
	r.adapt(b, err)
	r.holdFailed(b, err)
	for _, it := range b.results {
		e := err
		if e == nil {
			e = it.err
		}
		if e == nil {
			r.rt.wakeAfter(it.v)
		}
		if it.settled != nil {
			it.settled(it.d, it.v, e)
		}
	}
}

// holdFailed holds back, for its failure backoff, the row whose statement failed the claim
// (err): after the rollback, so another claim may take it once first (a row whose custom event
// failed behind a savepoint was held in the claim's transaction). It forgets the failures of
// the rows that settled.
func (r *rowLock) holdFailed(b *rlBatch, err error) {
	rt := r.rt
	for _, it := range b.results {
		switch {
		case err != nil && it.d == b.culprit && it.v.Action != core.ActAbandon:
			until, _ := rt.settlementFailed(it.d, it.v, err)
			rt.holdAlone(it.d, it.v, err, until)
		case err == nil && it.err == nil:
			rt.settlementOK(it.d.id)
		}
	}
}

// Close gives back the rows claimed but never handed out: they are left as they were, and a
// claim with nothing else in flight rolls back.
func (r *rowLock) Close() error {
	r.stop()
	r.aheads.Wait() // a claim ahead finds the source stopping and gives its rows back
	r.rt.closeListen()
	return nil
}
