package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// Source is the lease form's source and finisher. Its pieces, each a type of its own with at
// most one lock:
//
//   - the claimer (claimer.go, ahead.go) claims in cycles that settle what has finished and
//     claim the next batch in one transaction; Next hands the claims out (handout.go);
//   - the settler (settler.go) queues what finishes and flushes it in grouped transactions;
//   - the extender (extender.go) renews the leases of the deliveries still being handled;
//   - the tracker (tracker.go) keeps the claimed deliveries not yet settled;
//   - the rescuer (rescue.go, look.go) takes rows whose lease ran out, one at a time.
//
// A finished delivery is settled by one of three completion strategies: alone, in a transaction
// of its own (completer_alone.go); grouped, by the settler (completer_batch.go); or with the
// next claim, in its transaction or pipeline (completer_claim.go).
type Source struct {
	rt *engine.Runtime
	st *statements

	hand   handout
	track  tracker
	settle settler
	cl     claimer
	ahead  ahead
	rescue rescuer
	ext    extender
	give   giver
	busy   engine.Unfinished // claimed, not yet finished
	tokens tokens

	alone   alone
	batch   grouped
	inClaim withClaim

	failed bool          // Next returned an error last (the settler was told Next is idle)
	out    engine.Outage // while the database does not answer; Next's

	stop    chan struct{}
	running sync.WaitGroup // the settler and the extender
	watch   sync.Once      // the give-back is armed on the first Next's context
	once    sync.Once      // Close
}

var (
	_ core.Source      = (*Source)(nil)
	_ core.Finisher    = (*Source)(nil)
	_ core.DelayHolder = (*Source)(nil)
)

// Reads are the mount options the lease form reads; the others are refused when it opens.
const Reads = engine.OptTransactional | engine.OptLeaseFor | engine.OptBatchSize | engine.OptPollInterval |
	engine.OptPerMessage | engine.OptFlushLimits | engine.OptLockTimeout | engine.OptStatementTimeout | engine.OptOnEvent

// Open opens a lease-form subscription of q: it checks the table, renders the statements and
// starts the settler and the extender.
func Open(ctx context.Context, q *engine.Queue, d driver.LeaseDialect, sub core.Subscription, cfg engine.Config) (*Source, error) {
	rt, st, err := prepare(ctx, q, d, sub, cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := rt.Listen(ctx); err != nil {
		return nil, err
	}
	return start(rt, st), nil
}

// prepare checks the table (hints: answers the catalogue's questions instead) and renders the
// statements of a lease-form subscription of q.
func prepare(ctx context.Context, q *engine.Queue, d driver.LeaseDialect, sub core.Subscription, cfg engine.Config, hints *engine.Hints) (*engine.Runtime, *statements, error) {
	if err := cfg.Refuse(q.Name, driver.FormLease, Reads); err != nil {
		return nil, nil, err
	}
	// A flush always starts well before a lease runs out, and an extension that waited for a row
	// lock still writes a lease end well in the future.
	cfg.Linger = min(cfg.Linger, cfg.Lease/4)
	cfg.LockWait = min(cfg.LockWait, cfg.Lease/4)
	rt, err := engine.Open(ctx, q, driver.FormLease, sub, cfg, hints)
	if err != nil {
		return nil, nil, err
	}
	if err := rt.PinClaimIndex(ctx); err != nil {
		return nil, nil, err
	}
	if err := rt.OrderByGroup(ctx); err != nil {
		return nil, nil, err
	}
	st, err := render(rt, d)
	return rt, st, err
}

// Statements lists the statements a lease-form subscription of q renders, as golden files name
// them, with the catalogue's answers given: nothing is asked of the database.
func Statements(q *engine.Queue, d driver.LeaseDialect, sub core.Subscription, cfg engine.Config, hints engine.Hints) ([]engine.Named, error) {
	rt, st, err := prepare(context.Background(), q, d, sub, cfg, &hints)
	if err != nil {
		return nil, err
	}
	return st.named(rt)
}

// start makes the Source of rt and starts its goroutines.
func start(rt *engine.Runtime, st *statements) *Source {
	l := &Source{rt: rt, st: st, stop: make(chan struct{})}
	l.hand.taken = make(chan struct{}, 1)
	l.settle = settler{src: l, signal: make(chan struct{}, 1)}
	l.track = tracker{}
	l.cl.src, l.rescue.src, l.ext.src, l.alone.src, l.batch.src, l.inClaim.src = l, l, l, l, l, l
	l.ahead.results = make(chan aheadResult, 1)
	l.busy.Idle = make(chan struct{}, 1)
	l.rescue.look.inline = lookInline(rt)
	l.cl.size.Store(int32(rt.Cfg.Batch))
	if pl, ok := rt.DB.(driver.Pipeliner); ok && rt.Cfg.Events[engine.EventClaim] == nil {
		if sc, ok := st.claim.(driver.StepClaim); ok {
			l.inClaim.pipe, l.inClaim.step = pl, sc
		}
	}
	l.running.Add(2)
	go func() {
		defer l.running.Done()
		l.settle.run(l.stop)
	}()
	// The extension timer is armed before Open returns, not whenever the extender goroutine
	// first runs: tests on the virtual clock count armed timers.
	t := rt.Clock.NewTimer(rt.Cfg.Lease / 2)
	go func() {
		defer l.running.Done()
		l.ext.run(t, l.stop)
	}()
	return l
}

// lookInline reports whether the look for lapsed rows runs between claims rather than beside
// them (look.go): on a dialect whose locking reads lock more than the rows they return.
func lookInline(rt *engine.Runtime) bool {
	if rt.RowLocks == nil {
		return false
	}
	exact, ok := rt.D.(driver.ReturnedRowLocks)
	return !ok || !exact.LocksOnlyReturnedRows()
}

// HoldsDelays reports whether a RetryAfter is kept in the row (core.DelayHolder).
func (l *Source) HoldsDelays() bool { return l.rt.HoldsDelays() }

// Next hands out the next claimed delivery; when none is left it settles what has finished and
// claims the next batch, in one transaction.
func (l *Source) Next(ctx context.Context) (core.Delivery, error) {
	if l.failed {
		l.failed = false
		l.settle.setIdle(false)
	}
	d, err := l.next(ctx)
	if err != nil {
		// Core waits (a backoff, or for good) before it calls again: no claim cycle is coming
		// meanwhile to take what finishes.
		l.failed = true
		l.settle.setIdle(true)
	}
	return d, err
}

func (l *Source) next(ctx context.Context) (core.Delivery, error) {
	// Core stops pulling by cancelling this context, and may never call Next again: the rows
	// claimed but not handed out go back at once, so that what has finished settles without
	// waiting for them.
	l.watch.Do(func() { context.AfterFunc(ctx, func() { _ = l.giveBack() }) })
	// The settlements the last claim cycle committed are reported as Next returns: after it
	// started the next claim ahead, if it does (ahead.go).
	defer l.reportCycle()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		if d := l.handOut(ctx); d != nil {
			return d, nil
		}
		woken, b, err := l.nextClaim(ctx)
		if l.rt.ConnLost(err) {
			l.settle.setIdle(true) // no claim cycle until the server answers
			err := l.rt.AwaitServer(ctx, &l.out, err)
			l.settle.setIdle(false)
			if err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		l.rt.ServerBack(&l.out)
		if b != nil {
			if l.takeClaim(b) {
				continue
			}
			return nil, errors.Join(ctx.Err(), l.giveBack()) // stopped while claiming: hand nothing out
		}
		if err := l.waitReady(ctx, woken); err != nil {
			return nil, err
		}
	}
}

// handOut returns the next delivery of the current claim, starting the claimer ahead as the
// claim's first row goes; nil when the claim is handed out.
func (l *Source) handOut(ctx context.Context) *delivery {
	l.hand.mu.Lock()
	d, first := l.hand.nextLocked()
	ahead := d != nil && first && l.startAheadLocked()
	l.hand.mu.Unlock()
	if d == nil {
		return nil
	}
	if ahead {
		l.claimAhead(ctx)
	}
	if l.rt.Sub.Options.Timeout > 0 {
		d.mu.Lock()
		d.handedAt = l.rt.Clock.Now()
		d.mu.Unlock()
	}
	return d
}

// nextClaim runs the next claim cycle, or takes the claimer's, and returns what it claimed (nil:
// nothing) and the wake-up to wait on when that is nothing.
func (l *Source) nextClaim(ctx context.Context) (<-chan struct{}, *batch, error) {
	var woken <-chan struct{}
	var b *batch
	var done cycleDone
	var err error
	if l.ahead.running {
		woken, b, done, err = l.aheadDone()
	} else {
		woken = l.rt.Wake.Wait()
		b, done, err = l.cl.cycle(ctx)
	}
	if b == nil {
		done.report()
	} else {
		l.ahead.unreported = done
	}
	return woken, b, err
}

// takeClaim makes b the claim Next hands out; false when the subscription stopped meanwhile.
func (l *Source) takeClaim(b *batch) bool {
	l.hand.mu.Lock()
	defer l.hand.mu.Unlock()
	l.hand.cur, l.hand.pos = b, 0
	return !l.hand.stopping
}

// waitReady waits for rows (the poll interval, a wake-up). Meanwhile no claim cycle takes what
// has finished: the settler flushes it as soon as every claimed delivery has.
func (l *Source) waitReady(ctx context.Context, woken <-chan struct{}) error {
	l.settle.setIdle(true)
	defer l.settle.setIdle(false)
	return l.rt.WaitReady(ctx, woken, nil)
}

// Finish settles d: at once when it carries a transaction, a custom event or PerMessage is set
// (the alone completer), otherwise through the settler.
func (l *Source) Finish(_ context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	l.busy.Done(1)
	v = l.rt.Effective(&d.Delivery, v)
	// From here on the extender leaves the delivery alone: its settlement fences with the token
	// it has now. (An extension in flight finishes first: it holds d.mu.)
	d.mu.Lock()
	d.finishing = true
	d.mu.Unlock()
	if l.alone.takes(d, v) {
		// The settlement outlives a cancelled handler, and runs under a deadline.
		l.alone.complete(l.rt.StmtCtx(), d, v, settled)
		return
	}
	l.settle.enqueue(item{d: d, v: v, settled: settled})
}

// settleOne runs d's fenced statement for v on q: an abandon releases the lease, every other
// verdict runs the settlement every form shares. It reports whether the row still held d's
// lease.
func (l *Source) settleOne(ctx context.Context, q driver.Queryer, d *delivery, v core.Verdict, now time.Time) (bool, error) {
	if v.Action == core.ActAbandon {
		r, err := q.Exec(ctx, l.st.release, d.RowID(), l.rt.D.Time(d.token))
		if err != nil {
			return false, err
		}
		return r.RowsAffected > 0, nil
	}
	return l.rt.Settle(ctx, q, l.st.Settlements, &d.Delivery, d.token, v, now)
}

// Close releases the deliveries claimed but never handed out and stops the settler and the
// extender (the settler flushes what is queued first).
func (l *Source) Close() error {
	var err error
	l.once.Do(func() {
		err = l.giveBack()
		// A claim ahead still running gives its rows back itself once it ends (it finds the
		// source stopping); the settler must still be there to settle what it took.
		l.ahead.wg.Wait()
		l.rescue.look.wait()
		close(l.stop)
		l.running.Wait()
		l.rt.Close()
	})
	return err
}
