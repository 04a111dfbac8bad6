package sqlqueue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// lease is the lease form's source and finisher. The claim stamps locked_until (the token)
// and attempt + 1 and commits; finishing statements are fenced by the token. Three pieces,
// each in its own file and each free to wait on the database without holding up the others:
//
//   - claiming (lease_claim.go): Next hands out claimed deliveries and, when none is left,
//     settles what has finished and claims the next batch in one transaction; while claims
//     come back full and fast, a claimer goroutine runs those cycles one claim ahead of the
//     workers instead (lease_ahead.go);
//   - settling (lease_settle.go): Finish queues a finished delivery, and the settler goroutine
//     flushes the queue in grouped transactions when a claim's worth has finished, when every
//     claimed delivery has and no claim cycle is coming, or after the linger;
//   - extending (lease_extend.go): the extender goroutine renews the leases of the deliveries
//     still being handled, at half the lease.
//
// A delivery's token changes only while the extender holds its mutex, and never once Finish
// has marked it finishing: a queued settlement always fences with the token in the row.
type lease struct {
	rt *runtime

	// pipe and pipeClaim are set when a cycle can go as one pipeline: the DB pipelines and the
	// claim is one statement of the engine's own.
	pipe      Pipeliner
	pipeClaim driver.StepClaim

	// source side, used by Next (core never calls Next concurrently) and by giveBack when the
	// subscription stops pulling
	srcMu    sync.Mutex
	cur      *leaseBatch
	pos      int
	stopping bool
	watch    sync.Once
	giving   sync.Mutex // held while giving back
	failed   bool       // Next returned an error last (l.idle is set)
	claimBuf []Claimed
	out      outage // while the database does not answer
	// the rescue of lapsed claims (lease_rescue.go), used by Next only
	rescuing bool       // taking lapsed rows, one at a time, until there is none
	lapsed   bool       // this cycle's claim takes a lapsed row
	rescueAt time.Time  // when to look for lapsed rows again
	rescueBy time.Time  // how long to wait for the handlers before a rescue claim
	look     lapsedLook // the look for lapsed rows
	busy     unfinished // claimed, not yet finished
	// the automatic claim size (no BatchSize; lease_claim.go's adapt): size is read by the
	// settler too, lastClaim by Next only
	size      atomic.Int32
	lastClaim time.Time
	// claiming ahead (lease_ahead.go): mayAhead is set by the cycles (adapt), ahead and
	// unreported are Next's; pending, pendingDone, hasPending, waiting and awaitTake are under
	// srcMu
	mayAhead    bool
	ahead       bool             // a claimer runs, or its last cycle's outcome is not taken yet
	results     chan aheadResult // each cycle's outcome, to Next
	taken       chan struct{}    // Next took the pending claim (sent when awaitTake is set)
	pending     *leaseBatch      // the claim the claimer made, until Next takes it
	pendingDone cycleDone        // the settlements its cycle committed, unreported
	hasPending  bool             // the claimer's last outcome is not taken yet
	waiting     bool             // Next waits for the claimer's cycle
	awaitTake   bool             // the claimer waits for Next to take the pending claim
	unreported  cycleDone        // reported as Next returns (after it started the claimer)
	aheads      sync.WaitGroup   // the claimer, while it runs

	mu          sync.Mutex
	batches     []*leaseBatch
	outstanding int // claimed, not yet settled

	qmu    sync.Mutex
	queue  []item
	spare  []item    // an array popLocked handed out, given back by recycle
	queued time.Time // when the oldest queued item arrived
	signal chan struct{}
	// what the settler needs to know to leave a claim cycle's work to it (lease_settle.go's
	// flushDueLocked), under qmu
	timing   bool // the settler's linger timer is armed for what is queued
	idle     bool // Next waits for rows: no claim cycle is coming before a wake-up or the poll
	stopped  bool // the subscription stopped pulling: no claim cycle is coming at all
	claiming bool // a claimer runs ahead of the workers (lease_ahead.go): its next cycle takes what is queued

	stop    chan struct{}
	running sync.WaitGroup // the settler and the extender
	once    sync.Once
}

type leaseBatch struct {
	ds   []delivery
	left int
}

// item is one finished delivery waiting for the settler.
type item struct {
	d       *delivery
	v       core.Verdict
	settled core.Settled
	err     error // row lock: this delivery's own statement failed (the claim still commits); lease: how report found it settled
}

func newLease(rt *runtime) *lease {
	l := &lease{rt: rt, signal: make(chan struct{}, 1), stop: make(chan struct{}),
		results: make(chan aheadResult, 1), taken: make(chan struct{}, 1)}
	l.busy.idle = make(chan struct{}, 1)
	l.look.inline = rt.lookInline
	l.size.Store(int32(rt.cfg.batch))
	if pl, ok := rt.db.(Pipeliner); ok && rt.cfg.events[EventClaim] == nil {
		if sc, ok := rt.claim.(driver.StepClaim); ok {
			l.pipe, l.pipeClaim = pl, sc
		}
	}
	l.running.Add(2)
	go l.settler()
	// The extension timer is armed before Open returns, not whenever the extender goroutine
	// first runs: tests on the virtual clock count armed timers.
	go l.extender(rt.clock.NewTimer(rt.cfg.lease / 2))
	return l
}

// Next hands out the next claimed delivery; when none is left it settles what has finished
// and claims the next batch, in one transaction.
func (l *lease) Next(ctx context.Context) (core.Delivery, error) {
	if l.failed {
		l.failed = false
		l.setIdle(false)
	}
	d, err := l.next(ctx)
	if err != nil {
		// Core waits (a backoff, or for good) before it calls again: no claim cycle is coming
		// meanwhile to take what finishes.
		l.failed = true
		l.setIdle(true)
	}
	return d, err
}

func (l *lease) next(ctx context.Context) (core.Delivery, error) {
	// Core stops pulling by cancelling this context, and may never call Next again: the rows
	// claimed but not handed out go back at once, so that what has finished settles without
	// waiting for them.
	l.watch.Do(func() { context.AfterFunc(ctx, func() { _ = l.giveBack() }) })
	// The settlements the last claim cycle committed are reported as Next returns: after it
	// started the next claim ahead, if it does (lease_ahead.go).
	defer l.reportCycle()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		l.srcMu.Lock()
		if l.cur != nil && l.pos < len(l.cur.ds) {
			d := &l.cur.ds[l.pos]
			l.pos++
			ahead := l.pos == 1 && l.startAheadLocked()
			l.srcMu.Unlock()
			if ahead {
				l.claimAhead(ctx)
			}
			if l.rt.sub.Options.Timeout > 0 {
				d.mu.Lock()
				d.handedAt = l.rt.clock.Now()
				d.mu.Unlock()
			}
			return d, nil
		}
		l.cur = nil
		l.srcMu.Unlock()
		var woken <-chan struct{}
		var b *leaseBatch
		var done cycleDone
		var err error
		if l.ahead {
			woken, b, done, err = l.aheadDone()
		} else {
			woken = l.rt.wake.wait()
			b, done, err = l.cycle(ctx)
		}
		if b == nil {
			done.report()
		} else {
			l.unreported = done
		}
		if l.rt.connLost(err) {
			l.setIdle(true) // no claim cycle until the server answers
			err := l.rt.awaitServer(ctx, &l.out, err)
			l.setIdle(false)
			if err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		l.rt.serverBack(&l.out)
		if b != nil {
			l.srcMu.Lock()
			l.cur, l.pos = b, 0
			stopping := l.stopping
			l.srcMu.Unlock()
			if stopping { // stopped while claiming: hand nothing out
				return nil, errors.Join(ctx.Err(), l.giveBack())
			}
			continue
		}
		if err := l.waitReady(ctx, woken); err != nil {
			return nil, err
		}
	}
}

// waitReady waits for rows (the poll interval, a wake-up). Meanwhile no claim cycle takes what
// has finished: the settler flushes it as soon as every claimed delivery has.
func (l *lease) waitReady(ctx context.Context, woken <-chan struct{}) error {
	l.setIdle(true)
	defer l.setIdle(false)
	return l.rt.waitReady(ctx, woken, nil)
}

// cycle settles what has finished and claims: a lapsed row when one is due to be rescued
// (lease_rescue.go), otherwise, or when there is none, the next batch.
//
// The settlements the claim's transaction committed are reported by the cycleDone it returns,
// which the caller runs once it has handed the claim over: a claim ahead (lease_ahead.go) lets
// the workers have the next claim before it tells core about the last one's settlements.
func (l *lease) cycle(ctx context.Context) (*leaseBatch, cycleDone, error) {
	if err := l.rescueDue(ctx); err != nil {
		return nil, cycleDone{}, err
	}
	if !l.lapsed {
		return l.flushAndClaim(ctx)
	}
	b, done, err := l.flushAndClaim(ctx)
	done.report()
	l.lapsed = false
	if err != nil {
		return nil, cycleDone{}, err
	}
	l.rescued(b)
	if b != nil {
		return b, cycleDone{}, nil
	}
	return l.flushAndClaim(ctx)
}

// track makes the deliveries of claimed rows and keeps them for extension; nil for no rows.
func (l *lease) track(rows []Claimed, p ClaimParams) *leaseBatch {
	token := p.Token
	l.claimBuf = rows[:0]
	l.adapt(len(rows), p.Limit, p.Now)
	if len(rows) == 0 {
		l.rt.unspend(token)
		return nil
	}
	b := &leaseBatch{ds: newDeliveries(l.rt, rows), left: len(rows)}
	clear(rows)
	for i := range b.ds {
		b.ds[i].token, b.ds[i].lb = token, b
	}
	l.mu.Lock()
	l.batches = append(l.batches, b)
	l.outstanding += len(b.ds)
	l.mu.Unlock()
	l.busy.add(len(b.ds))
	return b
}

// Finish settles d: at once when it carries a transaction, a custom event or PerMessage is
// set, otherwise through the settler.
func (l *lease) Finish(ctx context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := l.rt
	l.busy.done(1)
	v = rt.effective(d, v)
	// From here on the extender leaves the delivery alone: its settlement fences with the
	// token it has now. (An extension in flight finishes first: it holds d.mu.)
	d.mu.Lock()
	d.finishing = true
	d.mu.Unlock()
	alone := rt.cfg.perMessage || rt.eventFor(v.Action) != nil // settled by its own transaction
	if d.hctx != nil || alone {
		// The settlement outlives a cancelled handler, and runs under a deadline.
		ctx = rt.stmtCtx()
	}
	if h := d.openTx(); h != nil {
		h.closed = true
		if v.Action == core.ActAck {
			l.finishInTx(ctx, d, h.tx, v, settled)
			return
		}
		if err := h.tx.Rollback(ctx); err != nil {
			rt.log.Warn("sqlqueue: rolling back the handler's transaction", "queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt, "error", err)
		}
	}
	if alone {
		tx, err := rt.begin(ctx)
		if err != nil {
			l.done(d, v, err, settled)
			return
		}
		l.finishInTx(ctx, d, tx, v, settled)
		return
	}
	l.enqueue(item{d: d, v: v, settled: settled})
}

// finishInTx runs d's statement in tx and commits; no matching row rolls back with ErrLeaseLost.
func (l *lease) finishInTx(ctx context.Context, d *delivery, tx Transaction, v core.Verdict, settled core.Settled) {
	rt := l.rt
	d.mu.Lock()
	ok, err := l.rt.finish(ctx, tx, d, v, l.rt.now())
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
		rt.wakeAfter(v)
	}
	l.done(d, v, err, settled)
	l.poke() // one fewer outstanding: what is queued may now be all there is
}

func (l *lease) lost(d *delivery) error {
	l.rt.log.Warn("sqlqueue: lease lost; another claim owns the row and the settlement changed nothing",
		"queue", l.rt.q.name, "message_id", d.ID(), "attempt", d.attempt)
	return &LeaseLostError{Queue: l.rt.q.name, Table: l.rt.table, ID: d.id, Attempt: d.attempt}
}

// done records d's settlement and reports it. A settlement that failed (its row still holds
// this delivery's lease) holds the row back for its failure backoff.
func (l *lease) done(d *delivery, v core.Verdict, err error, settled core.Settled) {
	l.record(d, v, err)
	l.forget(d)
	if settled != nil {
		settled(d, v, err)
	}
}

// record notes d's settlement (err: how it failed) before it is forgotten and reported.
func (l *lease) record(d *delivery, v core.Verdict, err error) {
	rt := l.rt
	switch {
	case err == nil:
		rt.settlementOK(d.id)
	case v.Action != core.ActAbandon && !errors.Is(err, ErrLeaseLost):
		until, _ := rt.settlementFailed(d, v, err)
		rt.holdAlone(d, v, err, until)
	}
	d.mu.Lock()
	d.settled = true
	d.mu.Unlock()
}

func (l *lease) forget(d *delivery) {
	l.mu.Lock()
	l.forgetLocked(d)
	l.mu.Unlock()
}

// forgetLocked drops d from the outstanding count and its batch; l.mu is held.
func (l *lease) forgetLocked(d *delivery) {
	l.outstanding--
	b := d.lb
	b.left--
	if b.left == 0 {
		for i, x := range l.batches {
			if x == b {
				last := len(l.batches) - 1
				l.batches[i] = l.batches[last]
				l.batches[last] = nil
				l.batches = l.batches[:last]
				break
			}
		}
	}
}

// giveBack releases, at once, the leases of the deliveries claimed but never handed out, and
// hands out nothing more.
func (l *lease) giveBack() error {
	// Close's call waits for the stop's: the rows are released before the source is closed.
	l.giving.Lock()
	defer l.giving.Unlock()
	l.setStopped()
	l.srcMu.Lock()
	l.stopping = true
	var rest []*delivery
	if l.cur != nil {
		for i := l.pos; i < len(l.cur.ds); i++ {
			rest = append(rest, &l.cur.ds[i])
		}
		l.cur = nil
	}
	if l.pending != nil { // claimed ahead: none of it was handed out
		for i := range l.pending.ds {
			rest = append(rest, &l.pending.ds[i])
		}
	}
	done := l.pendingDone
	l.takePendingLocked()
	l.srcMu.Unlock()
	done.report() // the claim ahead's settlements: Next may never take them now
	if len(rest) == 0 {
		return nil
	}
	l.busy.done(len(rest))
	items := make([]item, len(rest))
	for i, d := range rest {
		d.mu.Lock()
		d.finishing = true
		d.mu.Unlock()
		items[i] = item{d: d, v: core.Verdict{Action: core.ActAbandon}}
	}
	ctx, cancel := l.rt.background(context.Background())
	defer cancel()
	err := l.unclaim(ctx, items)
	if err != nil {
		l.rt.log.Warn("sqlqueue: releasing the leases of rows claimed but not handed out; they come back when their leases run out",
			"queue", l.rt.q.name, "rows", len(items), "error", err)
	}
	for _, it := range items {
		it.d.mu.Lock()
		it.d.settled = true
		it.d.mu.Unlock()
		l.forget(it.d)
	}
	l.rt.wake.notify() // the rows are ready again
	l.poke()           // what is queued may now be all there is
	return err
}

// unclaim releases the leases of rows claimed but never handed out, and takes back the
// attempt their claim counted: no handler saw them.
func (l *lease) unclaim(ctx context.Context, items []item) error {
	rt := l.rt
	if rt.st.unclaim == "" {
		return l.flushEach(ctx, items, make([]bool, len(items)), rt.now())
	}
	tx, err := rt.begin(ctx)
	if err != nil {
		return err
	}
	for _, it := range items {
		undo := rt.st.unclaim
		if it.d.uncharged {
			undo = rt.st.release // rescued: its claim counted nothing (doClaim)
		}
		if _, err := tx.Exec(ctx, undo, it.d.id, rt.d.Time(it.d.token)); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
	}
	return tx.Commit(ctx)
}

// Close releases the deliveries claimed but never handed out and stops the settler and the
// extender (the settler flushes what is queued first).
func (l *lease) Close() error {
	var err error
	l.once.Do(func() {
		err = l.giveBack()
		// A claim ahead still running gives its rows back itself once it ends (it finds the
		// source stopping); the settler must still be there to settle what it took.
		l.aheads.Wait()
		l.look.wait()
		close(l.stop)
		l.running.Wait()
		l.rt.closeListen()
	})
	return err
}
