package sqlqueue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// lease is the lease form's source and finisher. The claim stamps locked_until (the token)
// and attempt + 1 and commits; finishing statements are fenced by the token. Settlements are
// grouped: finished deliveries queue up, and their statements run in one transaction (one
// statement per token for ack and drop), either in the transaction of the next claim or, from
// the settler goroutine, when a claim's worth has finished, when every claimed delivery has
// finished, or after the linger. The settler also extends the leases of everything claimed at
// half the lease. flushMu orders all of it: whoever flushes or extends holds it, so a token
// is never read and renewed at once.
type lease struct {
	rt *runtime

	// pipe and pipeClaim are set when a cycle can go as one pipeline: the DB pipelines and the
	// claim is one statement of the engine's own.
	pipe      Pipeliner
	pipeClaim *stmtClaim

	// source side, used by Next (core never calls Next concurrently) and by giveBack when the
	// subscription stops pulling
	srcMu    sync.Mutex
	cur      *leaseBatch
	pos      int
	stopping bool
	watch    sync.Once
	claimBuf []Claimed

	mu          sync.Mutex
	batches     []*leaseBatch
	outstanding int // claimed, not yet settled

	qmu     sync.Mutex
	queue   []item
	queued  time.Time  // when the oldest queued item arrived
	flushMu sync.Mutex // held while flushing or extending: both read and write tokens
	signal  chan struct{}
	stop    chan struct{}
	stopped chan struct{}
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
	err     error // row lock: this delivery's own statement failed (the claim still commits)
}

func newLease(rt *runtime) *lease {
	l := &lease{rt: rt, signal: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	if pl, ok := rt.db.(Pipeliner); ok && rt.cfg.events[EventClaim] == nil {
		if sc, ok := rt.claim.(*stmtClaim); ok {
			l.pipe, l.pipeClaim = pl, sc
		}
	}
	// The extension timer is armed before Open returns, not whenever the settler goroutine
	// first runs: tests on the virtual clock count armed timers.
	go l.settler(rt.clock.NewTimer(rt.cfg.lease / 2))
	return l
}

// Next hands out the next claimed delivery; when none is left it settles what has finished
// and claims the next batch, in one transaction.
func (l *lease) Next(ctx context.Context) (core.Delivery, error) {
	// Core stops pulling by cancelling this context, and may never call Next again: the rows
	// claimed but not handed out go back at once, so that what has finished settles without
	// waiting for them.
	l.watch.Do(func() { context.AfterFunc(ctx, func() { _ = l.giveBack() }) })
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		l.srcMu.Lock()
		if l.cur != nil && l.pos < len(l.cur.ds) {
			d := &l.cur.ds[l.pos]
			l.pos++
			l.srcMu.Unlock()
			return d, nil
		}
		l.cur = nil
		l.srcMu.Unlock()
		woken := l.rt.wake.wait()
		b, err := l.flushAndClaim(ctx)
		if err != nil {
			return nil, err
		}
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
		if err := l.rt.waitReady(ctx, woken, nil); err != nil {
			return nil, err
		}
	}
}

// flushAndClaim settles what has finished and claims the next batch in one transaction: one
// commit instead of two, and the claim finds the settled rows gone instead of stepping over
// their leases. When the settlement cannot share the claim's transaction (a lease lost in the
// group, an error), it is flushed on its own first.
func (l *lease) flushAndClaim(ctx context.Context) (*leaseBatch, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	items := l.take()
	if len(items) == 0 {
		return l.claim(ctx)
	}
	rt := l.rt
	// The settlements must not be rolled back by a cancelled claim context.
	ctx = context.WithoutCancel(ctx)
	if b, ok, err := l.pipelined(ctx, items); ok {
		return b, err
	}
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		l.flush(items)
		return nil, err
	}
	lost := make([]bool, len(items))
	if err := l.settleIn(ctx, tx, items, lost, rt.now()); err != nil {
		_ = tx.Rollback(ctx)
		l.flush(items)
		return l.claim(ctx)
	}
	p := l.params(rt.now())
	rows, err := rt.doClaim(ctx, tx, p, l.claimBuf[:0])
	if err != nil {
		_ = tx.Rollback(ctx)
		l.flush(items)
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		l.report(items, lost, err)
		return nil, err
	}
	l.report(items, lost, nil)
	return l.track(rows, p.Token), nil
}

// pipelined settles items and claims the next batch through the DB's Pipeliner: one round
// trip and one commit. It applies when the DB pipelines, the claim is one statement and every
// item is an ack or drop; ok is false when it does not apply. When a grouped statement matches
// fewer rows than it names (a lease lost in the group), nothing was committed: the items are
// flushed on their own, which finds the lost one, and the claim runs by itself.
func (l *lease) pipelined(ctx context.Context, items []item) (b *leaseBatch, ok bool, err error) {
	rt := l.rt
	if l.pipe == nil {
		return nil, false, nil
	}
	for _, it := range items {
		if !isDone(it.v.Action) {
			return nil, false, nil
		}
	}
	p := l.params(rt.now())
	steps := l.doneSteps(items, p.Now)
	rows := l.claimBuf[:0]
	steps = append(steps, l.pipeClaim.step(p, &rows))
	switch err := l.pipe.Pipeline(ctx, steps); {
	case err == nil:
		l.report(items, nil, nil)
		return l.track(rows, p.Token), true, nil
	case errors.Is(err, ErrRowCount):
		l.flush(items)
		b, err := l.claim(ctx)
		return b, true, err
	default:
		l.report(items, nil, err)
		return nil, true, err
	}
}

// doneSteps renders the grouped settlement of the ack and drop items, one statement per
// token, each wanting exactly its rows; other items are left out.
func (l *lease) doneSteps(items []item, now time.Time) []Step {
	rt := l.rt
	var steps []Step
	handled := make([]bool, len(items))
	for i, it := range items {
		if handled[i] || !isDone(it.v.Action) {
			continue
		}
		tok := it.d.token
		var args []any
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
		steps = append(steps, Step{SQL: rt.st.doneMany.sql(ids), Args: args, Want: int64(ids)})
	}
	return steps
}

// take removes up to a flush's worth of finished items from the queue.
func (l *lease) take() []item {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.popLocked()
}

// popLocked removes up to a flush's worth of items from the front of the queue; l.qmu is held.
func (l *lease) popLocked() []item {
	n := min(len(l.queue), l.rt.cfg.maxFlush)
	if n == 0 {
		return nil
	}
	items := make([]item, n)
	copy(items, l.queue)
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	if rest > 0 {
		l.queued = l.rt.clock.Now()
	}
	return items
}

// claim claims a batch and tracks it; nil when no row is ready.
func (l *lease) claim(ctx context.Context) (*leaseBatch, error) {
	rt := l.rt
	p := l.params(rt.now())
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := rt.doClaim(ctx, tx, p, l.claimBuf[:0])
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return l.track(rows, p.Token), nil
}

// params are the values of a claim at now: a fresh token a lease ahead.
func (l *lease) params(now time.Time) ClaimParams {
	rt := l.rt
	return ClaimParams{Now: now, Token: rt.nextToken(now.Add(rt.cfg.lease)), Limit: rt.cfg.batch, Group: rt.q.group}
}

// track makes the deliveries of claimed rows and keeps them for extension; nil for no rows.
func (l *lease) track(rows []Claimed, token time.Time) *leaseBatch {
	l.claimBuf = rows[:0]
	if len(rows) == 0 {
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
	return b
}

// Finish settles d: at once when it carries a transaction, a custom event or PerMessage is
// set, otherwise through the settler.
func (l *lease) Finish(ctx context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := l.rt
	v = rt.effective(d, v)
	alone := rt.cfg.perMessage || rt.eventFor(v.Action) != nil // settled by its own transaction
	if d.hctx.d != nil || alone {
		ctx = context.WithoutCancel(ctx) // the settlement outlives a cancelled handler
	}
	if h := d.openTx(); h != nil {
		h.closed = true
		if v.Action == core.ActAck {
			l.finishInTx(ctx, d, h.tx, v, settled)
			return
		}
		if err := h.tx.Rollback(ctx); err != nil {
			rt.log.Warn("sqlqueue: rolling back the handler's transaction", "message_id", d.ID(), "attempt", d.attempt, "error", err)
		}
	}
	if alone {
		tx, err := rt.db.Begin(ctx)
		if err != nil {
			l.done(d, v, err, settled)
			return
		}
		l.finishInTx(ctx, d, tx, v, settled)
		return
	}
	l.qmu.Lock()
	if len(l.queue) == 0 {
		l.queued = rt.clock.Now()
	}
	l.queue = append(l.queue, item{d: d, v: v, settled: settled})
	n := len(l.queue)
	l.mu.Lock()
	all := n >= l.outstanding
	l.mu.Unlock()
	l.qmu.Unlock()
	// Wake the settler only when it has something to decide: a first item (to time its
	// linger), a full flush, or nothing else outstanding.
	if n == 1 || all || n >= min(rt.cfg.maxFlush, rt.cfg.batch) {
		l.poke()
	}
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

// done records d's settlement and reports it.
func (l *lease) done(d *delivery, v core.Verdict, err error, settled core.Settled) {
	d.mu.Lock()
	d.settled = true
	d.mu.Unlock()
	l.forget(d)
	if settled != nil {
		settled(d, v, err)
	}
}

func (l *lease) forget(d *delivery) {
	l.mu.Lock()
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
	l.mu.Unlock()
}

func (l *lease) poke() {
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// settler flushes finished deliveries and extends leases; it owns every grouped statement.
func (l *lease) settler(ext clock.Timer) {
	defer close(l.stopped)
	rt := l.rt
	half := rt.cfg.lease / 2
	defer ext.Stop()
	var linger clock.Timer
	var lingerC <-chan time.Time
	for {
		force := false
		select {
		case <-l.signal:
		case <-ext.C():
			l.flushMu.Lock()
			l.flushReady(true)
			l.extend()
			l.flushMu.Unlock()
			ext.Reset(half)
			continue
		case <-lingerC:
			lingerC = nil
			force = true
		case <-l.stop:
			l.flushMu.Lock()
			l.flushReady(true)
			l.flushMu.Unlock()
			if linger != nil {
				linger.Stop()
			}
			return
		}
		l.flushMu.Lock()
		wait := l.flushReady(force)
		l.flushMu.Unlock()
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

// flushReady flushes what is queued when it should go now, and otherwise returns how long the
// oldest item may still wait.
func (l *lease) flushReady(force bool) time.Duration {
	rt := l.rt
	for {
		l.qmu.Lock()
		n := len(l.queue)
		if n == 0 {
			l.qmu.Unlock()
			return 0
		}
		l.mu.Lock()
		all := n >= l.outstanding
		l.mu.Unlock()
		waited := rt.clock.Now().Sub(l.queued)
		if !force && !all && n < min(rt.cfg.maxFlush, rt.cfg.batch) && waited < rt.cfg.linger {
			l.qmu.Unlock()
			return rt.cfg.linger - waited
		}
		items := l.popLocked()
		l.qmu.Unlock()
		l.flush(items)
		force = false
	}
}

// flush settles items in one transaction.
func (l *lease) flush(items []item) {
	rt := l.rt
	ctx := context.Background()
	now := rt.now()
	lost := make([]bool, len(items))
	err := l.flushFast(ctx, items, lost, now)
	if err == errMismatch {
		clear(lost)
		err = l.flushEach(ctx, items, lost, now)
	}
	l.report(items, lost, err)
}

// report tells core how items were settled: err for all, or per item lost (nil lost: none) or
// done.
func (l *lease) report(items []item, lost []bool, err error) {
	for i, it := range items {
		e := err
		if e == nil && lost != nil && lost[i] {
			e = l.lost(it.d)
		}
		if e == nil {
			l.rt.wakeAfter(it.v)
		}
		l.done(it.d, it.v, e, it.settled)
	}
}

type mismatch struct{}

func (mismatch) Error() string {
	return "sqlqueue: grouped settlement matched fewer rows than it settles"
}

var errMismatch error = mismatch{}

// flushFast settles ack and drop with one statement per token; when one matches fewer rows
// than it names, it rolls back and returns errMismatch so that flushEach finds which.
func (l *lease) flushFast(ctx context.Context, items []item, lost []bool, now time.Time) error {
	tx, err := l.rt.db.Begin(ctx)
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
	for _, st := range l.doneSteps(items, now) {
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
	tx, err := l.rt.db.Begin(ctx)
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

func isDone(a core.Action) bool { return a == core.ActAck || a == core.ActDrop }

// extend renews the lease of every claimed delivery not yet settled. A row whose lease already
// belongs to a later claim is marked lost; its settlement will report ErrLeaseLost.
func (l *lease) extend() {
	rt := l.rt
	l.mu.Lock()
	var ds []*delivery
	for _, b := range l.batches {
		for i := range b.ds {
			ds = append(ds, &b.ds[i])
		}
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return
	}
	ctx := context.Background()
	now := rt.now()
	tok := rt.nextToken(now.Add(rt.cfg.lease))
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		rt.log.Error("sqlqueue: extending leases", "error", err)
		return
	}
	var held []*delivery
	var renewed []bool
	defer func() {
		for _, d := range held {
			d.mu.Unlock()
		}
	}()
	for _, d := range ds {
		if !d.mu.TryLock() {
			continue // being settled right now
		}
		if d.settled || d.lost {
			d.mu.Unlock()
			continue
		}
		held = append(held, d)
		r, err := tx.Exec(ctx, rt.st.extend, rt.d.Time(tok), d.id, rt.d.Time(d.token))
		if err != nil {
			_ = tx.Rollback(ctx)
			rt.log.Error("sqlqueue: extending leases", "error", err)
			return
		}
		renewed = append(renewed, r.RowsAffected > 0)
	}
	if err := tx.Commit(ctx); err != nil {
		rt.log.Error("sqlqueue: extending leases", "error", err)
		return
	}
	for i, d := range held {
		if renewed[i] {
			d.token = tok
			continue
		}
		d.lost = true
		rt.log.Warn("sqlqueue: lease lost while the handler works; another claim owns the row",
			"queue", rt.q.name, "message_id", d.ID(), "attempt", d.attempt)
	}
	rt.log.Debug("sqlqueue: leases extended", "rows", len(held), "locked_until", tok)
}

// giveBack releases, at once, the leases of the deliveries claimed but never handed out, and
// hands out nothing more.
func (l *lease) giveBack() error {
	l.srcMu.Lock()
	l.stopping = true
	var rest []*delivery
	if l.cur != nil {
		for i := l.pos; i < len(l.cur.ds); i++ {
			rest = append(rest, &l.cur.ds[i])
		}
		l.cur = nil
	}
	l.srcMu.Unlock()
	if len(rest) == 0 {
		return nil
	}
	items := make([]item, len(rest))
	for i, d := range rest {
		items[i] = item{d: d, v: core.Verdict{Action: core.ActAbandon}}
	}
	lost := make([]bool, len(items))
	l.flushMu.Lock()
	err := l.flushEach(context.Background(), items, lost, l.rt.now())
	l.flushMu.Unlock()
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

// Close releases the deliveries claimed but never handed out and stops the settler.
func (l *lease) Close() error {
	var err error
	l.once.Do(func() {
		err = l.giveBack()
		close(l.stop)
		<-l.stopped
		l.rt.closeListen()
	})
	return err
}
