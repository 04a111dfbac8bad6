package advisory

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// Source is the advisory-lock form's source and finisher. Each worker has a dedicated
// connection (conns.go); a row is taken by locking its key on a free connection (TryLock), then
// counting the attempt (taker.go). Its finishing statement commits on its own on that
// connection, and the key is unlocked afterwards, also when the statement failed.
type Source struct {
	rt *engine.Runtime
	st *statements
	ad driver.AdvisoryDialect

	conns    conns
	released chan struct{} // a key was unlocked
	// Next's own (core never calls it concurrently): the rows taken and not yet handed out,
	// the rescue of lapsed takes, an outage
	buf    []*delivery
	pos    int
	rescue rescuer
	out    engine.Outage
}

var (
	_ core.Source      = (*Source)(nil)
	_ core.Finisher    = (*Source)(nil)
	_ core.DelayHolder = (*Source)(nil)
)

// Reads are the mount options the advisory form reads; the others are refused when it opens.
const Reads = engine.OptTransactional | engine.OptBatchSize | engine.OptPollInterval | engine.OptLockTimeout |
	engine.OptStatementTimeout | engine.OptAdvisoryKey | engine.OptOnEvent

// Open opens an advisory-form subscription of q: it checks the table, names its keys after the
// table as the server identifies it, and renders the statements.
func Open(ctx context.Context, q *engine.Queue, d driver.AdvisoryDialect, sub core.Subscription, cfg engine.Config) (*Source, error) {
	rt, st, err := prepare(ctx, q, d, sub, cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := rt.Listen(ctx); err != nil {
		return nil, err
	}
	a := &Source{rt: rt, st: st, ad: d, released: make(chan struct{}, 1)}
	a.rescue.src = a
	for range max(sub.Options.Workers, 1) {
		a.conns.all = append(a.conns.all, &conn{})
	}
	return a, nil
}

// prepare checks the table (hints: answers the catalogue's questions instead) and renders the
// statements of an advisory-form subscription of q.
func prepare(ctx context.Context, q *engine.Queue, d driver.AdvisoryDialect, sub core.Subscription, cfg engine.Config, hints *engine.Hints) (*engine.Runtime, *statements, error) {
	if err := cfg.Refuse(q.Name, driver.FormAdvisory, Reads); err != nil {
		return nil, nil, err
	}
	if cfg.Events[engine.EventClaim] != nil {
		return nil, nil, errClaimEvent(q.Name)
	}
	rt, err := engine.Open(ctx, q, driver.FormAdvisory, sub, cfg, hints)
	if err != nil {
		return nil, nil, err
	}
	if err := rt.OrderByGroup(ctx); err != nil {
		return nil, nil, err
	}
	if err := rt.NameKeysCanonically(ctx); err != nil {
		return nil, nil, err
	}
	return rt, render(rt, d), nil
}

// Statements lists the statements an advisory-form subscription of q renders, as golden files
// name them, with the catalogue's answers given: nothing is asked of the database.
func Statements(q *engine.Queue, d driver.AdvisoryDialect, sub core.Subscription, cfg engine.Config, hints engine.Hints) ([]engine.Named, error) {
	_, st, err := prepare(context.Background(), q, d, sub, cfg, &hints)
	if err != nil {
		return nil, err
	}
	list := st.Settlements.Named("")
	list = engine.Add(list, "candidates", st.candidates, st.candB)
	list = engine.Add(list, "takeStamp", st.takeStamp, st.takeB)
	list = engine.Add(list, "takeRead", st.takeRead, nil)
	return engine.Add(list, "untake", st.untake, nil), nil
}

// HoldsDelays reports whether a RetryAfter is kept in the row (core.DelayHolder).
func (a *Source) HoldsDelays() bool { return a.rt.HoldsDelays() }

// Next hands out the next row taken, taking rows when none is left.
func (a *Source) Next(ctx context.Context) (core.Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // stopping: take nothing more, not even what is already claimed
		}
		if a.pos < len(a.buf) {
			d := a.buf[a.pos]
			a.buf[a.pos] = nil
			a.pos++
			return d, nil
		}
		woken := a.rt.Wake.Wait()
		n, err := a.take(ctx)
		if a.rt.ConnLost(err) {
			if err := a.rt.AwaitServer(ctx, &a.out, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		a.rt.ServerBack(&a.out)
		if n > 0 {
			continue
		}
		if err := a.waitReady(ctx, woken); err != nil {
			return nil, err
		}
	}
}

// waitReady waits for rows: a suspect runs alone, so nothing is taken until it is settled;
// otherwise for the poll interval, a wake-up or a key unlocked.
func (a *Source) waitReady(ctx context.Context, woken <-chan struct{}) error {
	if !a.conns.holdsSuspect() {
		return a.rt.WaitReady(ctx, woken, a.released)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.released:
	}
	return nil
}

// Finish runs d's statement on its connection, then unlocks its key.
func (a *Source) Finish(_ context.Context, cd core.Delivery, v core.Verdict, settled core.Settled) {
	d := cd.(*delivery)
	rt := a.rt
	ctx := rt.StmtCtx() // the settlement outlives a cancelled handler, and runs under a deadline
	v = rt.Effective(&d.Delivery, v)
	ac := d.ac
	err := a.settle(ctx, d, v)
	switch {
	case err == nil:
		rt.Holds.Settled(d.RowID())
	case v.Action != core.ActAbandon:
		// Held back before the key is released, so that no claimant takes it at once.
		until, _ := rt.Holds.Failed(&d.Delivery, v, err)
		if ac.c != nil {
			hctx, cancel := rt.Background(ctx)
			rt.Holds.Hold(hctx, ac.c, a.st.Settlements, &d.Delivery, noToken, v, err, until)
			cancel()
		}
	}
	a.unlock(ac, d.key)
	if err == nil {
		rt.WakeAfter(v)
	}
	if settled != nil {
		settled(d, v, err)
	}
}

// settle runs d's statement for v on its connection: in the handler's transaction for an ack
// (which commits its writes with the settlement), otherwise, the handler's writes rolled back,
// on its own or in a transaction of its own where it takes several statements.
func (a *Source) settle(ctx context.Context, d *delivery, v core.Verdict) error {
	rt := a.rt
	if h := d.OpenTx(); h != nil {
		h.Close()
		if v.Action == core.ActAck {
			return a.commit(ctx, h.Tx(), d, v)
		}
		if err := h.Tx().Rollback(ctx); err != nil {
			return err
		}
	}
	if v.Action == core.ActAbandon {
		return nil
	}
	if !rt.NeedsTx(a.st.Settlements, v) {
		_, err := rt.Settle(ctx, d.ac.c, a.st.Settlements, &d.Delivery, noToken, v, rt.Now())
		return err
	}
	tx, err := d.ac.c.Begin(ctx)
	if err != nil {
		return err
	}
	return a.commit(ctx, tx, d, v)
}

// commit runs d's statement for v in tx and commits it.
func (a *Source) commit(ctx context.Context, tx driver.Transaction, d *delivery, v core.Verdict) error {
	if _, err := a.rt.Settle(ctx, tx, a.st.Settlements, &d.Delivery, noToken, v, a.rt.Now()); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// unlock releases key and frees the connection; a connection that cannot unlock is discarded,
// which releases everything it held.
func (a *Source) unlock(ac *conn, key string) {
	if err := a.ad.Unlock(a.rt.StmtCtx(), ac.c, key); err != nil {
		a.rt.Log.Warn("sqlqueue: advisory unlock failed; closing the connection to release it", "key", key, "error", err)
		discard(ac)
	}
	a.conns.release(ac)
	select {
	case a.released <- struct{}{}:
	default:
	}
}

// Close unlocks the rows taken but never handed out and gives the connections back.
func (a *Source) Close() error {
	for _, d := range a.buf[a.pos:] {
		a.untake(d)
		a.unlock(d.ac, d.key)
	}
	a.buf, a.pos = nil, 0
	// A connection whose session carries the subscription's lock timeout is not pooled again.
	err := a.conns.closeAll(a.rt.LockSession != "")
	a.rt.Close()
	return err
}

// noToken is the token of an advisory settlement: the key held on its connection protects the
// row, and no token fences its statements.
var noToken time.Time

// errClaimEvent refuses a custom claim event: the advisory form takes rows by their keys.
func errClaimEvent(queue string) error {
	return fmt.Errorf("sqlqueue: queue %q: the advisory form takes rows by locking their keys; a custom claim event applies to the lease and row-lock forms only", queue)
}
