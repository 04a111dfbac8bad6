package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// queue is an Endpoint: one queue (a table, or a group of a table) in one claim form.
type queue struct {
	form    Form
	d       Dialect
	db      DB
	schema  *Schema
	group   string
	name    string
	lease   LeaseDialect
	rowLock RowLockDialect
	adv     AdvisoryDialect
}

// NewLease returns the lease-form endpoint of a queue: the table t, and in a table with a
// group column, the group (empty otherwise). Dialect modules call it from their constructors.
func NewLease(d LeaseDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormLease, d, db, t, group)
	if err != nil {
		return nil, err
	}
	if q.schema.LockedUntil == "" {
		return nil, fmt.Errorf("sqlqueue: table %s: the lease form needs a locked_until column (Columns.LockedUntil)", t.Ref())
	}
	q.lease = d
	return q, nil
}

// NewRowLock returns the row-lock-form endpoint of a queue (see NewLease).
func NewRowLock(d RowLockDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormRowLock, d, db, t, group)
	if err != nil {
		return nil, err
	}
	q.rowLock = d
	return q, nil
}

// NewAdvisory returns the advisory-lock-form endpoint of a queue (see NewLease).
func NewAdvisory(d AdvisoryDialect, db DB, t Table, group string) (core.Endpoint, error) {
	q, err := newQueue(FormAdvisory, d, db, t, group)
	if err != nil {
		return nil, err
	}
	q.adv = d
	return q, nil
}

func newQueue(f Form, d Dialect, db DB, t Table, group string) (*queue, error) {
	if d == nil || db == nil {
		what := f.String() + " queue"
		if f == 0 {
			what = "publisher"
		}
		return nil, fmt.Errorf("sqlqueue: %s on table %s: nil dialect or database", what, t.Ref())
	}
	s, err := NewSchema(d, t)
	if err != nil {
		return nil, err
	}
	q := &queue{form: f, d: d, db: db, schema: s, group: group, name: t.Ref().String()}
	switch {
	case s.Group != "" && strings.TrimSpace(group) == "":
		return nil, fmt.Errorf("sqlqueue: table %s has a group column (%s): name the queue's group", t.Ref(), t.Columns.Group)
	case s.Group == "" && group != "":
		return nil, fmt.Errorf("sqlqueue: table %s has no group column, so it cannot hold group %q (name Columns.Group, or pass \"\")", t.Ref(), group)
	case s.Group != "":
		q.name = group
	}
	return q, nil
}

// Queue names the queue: its group, or the table.
func (q *queue) Queue() string { return q.name }

func (q *queue) ref() QueueRef { return QueueRef{Table: q.schema.Table.Ref(), Group: q.group} }

// runtime is one opened subscription: what every form shares.
type runtime struct {
	q     *queue
	s     *Schema
	d     Dialect
	db    DB
	cfg   config
	sub   core.Subscription
	log   *slog.Logger
	clock clock.Clock
	st    statements
	claim Claim
	// rescue is the lease form's claim of rows whose lease ran out without a settlement, and
	// lapsedProbe looks whether there is one (lease_rescue.go); nil and "" with a custom claim.
	rescue       Claim
	lapsedProbe  string
	lapsedProbeB *driver.Binder
	wake         *wakeEntry
	stopLn       func()
	dlRef        TableRef // the dead-letter table, in a table without a group column
	table        string   // the table's name, for errors
	keys         string   // advisory form: the table's name in its keys (TableIdentity), else table

	// count is when the row-lock form commits attempt + 1 before it locks the rows it claims
	// (CountAtClaim); the settlements of such a claim use stCounted, which count nothing more.
	count     countMode
	stCounted statements

	// rowLocks is the dialect's row-locking capability, nil without one; lockTx and
	// lockSession bound a transaction's and a dedicated connection's row-lock waits.
	rowLocks            RowLocking
	lockTx, lockSession string
	// lookInline: the look for lapsed rows runs between claims, not beside them (lapsed_look.go)
	lookInline bool

	lastToken atomic.Int64 // lease: the last token stamped, in microseconds

	fails failures // rows whose settlement failed, held back (failing.go)

	// stmt is the shared deadline context of the statements the engine runs per delivery
	// (stmtCtx).
	stmtMu     sync.Mutex
	stmt       context.Context
	stmtUntil  time.Time
	stmtCancel [2]context.CancelFunc // the current context's and the one before it

	delayMu      sync.Mutex
	delays       []delayedWake
	delaysClosed bool
}

// Open checks the table against the catalogue, renders the statements and starts the form's
// source and finisher.
func (q *queue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	cfg := configOf(sub.Options)
	if cfg.batch == 0 {
		cfg.batch = min(10*max(sub.Options.Workers, 1), maxBaseBatch)
		cfg.batchAuto = q.form != FormAdvisory
		// A claim's settlements fit one grouped flush: a larger claim would have the settler
		// flush part of it on its own, racing the claim cycle that settles the rest.
		cfg.batchMax = max(cfg.batch, min(DefaultMaxBatch, cfg.maxFlush))
	}
	if cfg.perMessage && q.form == FormRowLock {
		cfg.batch = 1 // one row per claim's transaction, as PerMessage says: the size never grows
		cfg.batchAuto = false
	}
	if q.form == FormLease {
		cfg.linger = min(cfg.linger, cfg.lease/4) // a flush always starts well before a lease runs out
		// An extension that waited for a row lock still writes a lease end well in the future.
		cfg.lockWait = min(cfg.lockWait, cfg.lease/4)
	}
	if q.form == FormAdvisory && cfg.events[EventClaim] != nil {
		return nil, nil, fmt.Errorf("sqlqueue: queue %q: the advisory form takes rows by locking their keys; a custom claim event applies to the lease and row-lock forms only", q.name)
	}
	rt := &runtime{q: q, s: q.schema, d: q.d, db: q.db, cfg: cfg, sub: sub, clock: sub.Clock,
		table: q.schema.Table.Ref().String()}
	rt.log = sub.Logger.With("table", rt.table)
	if rt.clock == nil {
		rt.clock = clock.Real()
	}
	if rl, ok := q.d.(RowLocking); ok {
		rt.rowLocks = rl
		rt.lockTx, rt.lockSession = rl.LockTimeout(cfg.lockWait, false), rl.LockTimeout(cfg.lockWait, true)
		exact, ok := q.d.(ReturnedRowLocks)
		rt.lookInline = !ok || !exact.LocksOnlyReturnedRows()
	}
	if err := rt.check(ctx); err != nil {
		return nil, nil, err
	}
	// Counting at claim locks the counted rows again by id: it needs the dialect's lock clause.
	if q.form == FormRowLock && q.schema.Attempt != "" && cfg.events[EventClaim] == nil && rt.rowLocks != nil {
		switch {
		case cfg.count > 0:
			rt.count = countAlways
		case cfg.count == 0 && sub.Options.Cap > 0:
			rt.count = countRamp
		}
	}
	if ci, ok := q.d.(ClaimIndex); ok && q.form != FormAdvisory && rt.rowLocks != nil {
		var leading []string
		for _, c := range []string{q.schema.Table.Columns.Group, q.schema.Table.Columns.ProcessedAt} {
			if c != "" {
				leading = append(leading, c)
			}
		}
		hint, err := ci.ClaimIndexHint(ctx, q.db, q.schema.Table.Ref(), leading)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlqueue: queue %q: choosing the index of table %s its claims read: %w", q.name, rt.table, err)
		}
		s := *q.schema
		s.ClaimHint = hint
		rt.s = &s
	}
	if gd, ok := q.d.(GroupOrder); ok && q.schema.Group != "" {
		ordered, err := gd.GroupOrdered(ctx, q.db, q.schema.Table)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlqueue: queue %q: looking for the index of table %s its claims read: %w", q.name, rt.table, err)
		}
		if ordered {
			s := *rt.s
			s.GroupOrder = true
			rt.s = &s
		} else {
			rt.log.Warn("sqlqueue: no index of the queue table starts with its group and id columns (the ready index of the dialect's CreateTable); its claims may read the table through the primary key, past every processed row and dead letter in front of the ready ones",
				"queue", q.name, "group", q.schema.Group)
		}
	}
	rt.keys = rt.table
	if ti, ok := q.d.(TableIdentity); ok && q.form == FormAdvisory {
		ref, err := ti.CanonicalTable(ctx, q.db, q.schema.Table.Ref())
		if err != nil {
			return nil, nil, fmt.Errorf("sqlqueue: queue %q: resolving table %s for its advisory keys: %w", q.name, rt.table, err)
		}
		rt.keys = ref.String()
	}
	if err := rt.render(); err != nil {
		return nil, nil, err
	}
	rt.wake = wakes.entry(q.db, q.ref())
	if n, ok := q.d.(Notifier); ok {
		stop, err := n.Listen(ctx, q.db, q.ref(), rt.wake.notify)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlqueue: queue %q: listening for wake-ups: %w", q.name, err)
		}
		rt.stopLn = stop
	}
	switch q.form {
	case FormLease:
		l := newLease(rt)
		return l, l, nil
	case FormRowLock:
		r := newRowLock(rt)
		return r, r, nil
	default:
		a := newAdvisory(rt)
		return a, a, nil
	}
}

// check asks the catalogue for every column the description names.
func (rt *runtime) check(ctx context.Context) error {
	t := rt.s.Table
	opts := rt.sub.Options
	if err := driver.CheckColumns(ctx, rt.d, rt.db, t, t.Ref()); err != nil {
		return err
	}
	if opts.Cap > 0 && rt.s.Attempt == "" {
		return &ColumnError{Table: rt.table, Role: "attempt",
			Reason: fmt.Sprintf("DeadLetterAfter(%d, %q) needs an attempt column to count deliveries (Columns.Attempt)", opts.Cap, opts.DeadLetterTo)}
	}
	if opts.DeadLetterTo != "" && rt.s.Group == "" {
		ref, err := ParseTableRef(opts.DeadLetterTo)
		if err != nil {
			return fmt.Errorf("sqlqueue: dead letter of table %s (no group column, so the destination is a table): %w", rt.table, err)
		}
		if ref == t.Ref() {
			return fmt.Errorf("sqlqueue: table %s cannot be its own dead-letter table", rt.table)
		}
		if err := driver.CheckColumns(ctx, rt.d, rt.db, t, ref); err != nil {
			return fmt.Errorf("dead-letter table: %w", err)
		}
		rt.dlRef = ref
	}
	return nil
}

// countMode is when a row-lock claim counts attempts at claim.
type countMode uint8

const (
	countNever  countMode = iota // in the settling statement, inside the claim's transaction
	countRamp                    // at claim while the claim size is below BatchSize (CountAtClaim's default)
	countAlways                  // at every claim (CountAtClaim(true))
)

// stFor returns the statements that settle d.
func (rt *runtime) stFor(d *delivery) *statements {
	if d.counted {
		return &rt.stCounted
	}
	return &rt.st
}

// nextToken makes a subscription's lease tokens strictly increasing, so that two of its claims
// never stamp the same token even when the clock does not move between them (a coarse clock).
// A later claim of the same row by anyone stamps a later token anyway: it can only take the
// row once the earlier token has passed. (Claimants of one queue should share one lease
// length, or a short lease taken just as a long one expires could repeat its token.)
func (rt *runtime) nextToken(t time.Time) time.Time {
	n := t.UTC().Truncate(time.Microsecond).UnixMicro()
	for {
		last := rt.lastToken.Load()
		if n <= last {
			n = last + 1
		}
		if rt.lastToken.CompareAndSwap(last, n) {
			return time.UnixMicro(n).UTC()
		}
	}
}

// unspend gives back token, the last one nextToken made, after its claim stamped no row: the
// next claim may use it. (A look for lapsed rows runs beside the claims, so that a claimant
// whose first claim finds only lapsed rows then rescues one with the token it would have taken
// had it looked first.)
func (rt *runtime) unspend(token time.Time) {
	n := token.UnixMicro()
	rt.lastToken.CompareAndSwap(n, n-1)
}

// keyPrefix starts every advisory key of the queue's rows: the table's name (canonical, from
// TableIdentity) and a colon.
func (rt *runtime) keyPrefix() string {
	if rt.keys == "" {
		return rt.table + ":"
	}
	return rt.keys + ":"
}

func (rt *runtime) now() time.Time { return rt.clock.Now().UTC().Truncate(time.Microsecond) }

// background returns the context of statements the engine runs on its own behalf (a grouped
// settlement, an extension, an unlock): parent's values without its cancellation, under the
// subscription's statement timeout, so that none of them can block the subscription forever.
func (rt *runtime) background(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), rt.cfg.stmtTimeout)
}

// stmtCtx returns a context for a statement the engine runs per delivery (a settlement, an
// unlock), with a deadline between half the statement timeout and all of it. One context
// serves every statement of that window, so that the per-message path allocates no timer; a
// statement past its deadline is cancelled rather than left to hang. It carries no caller's
// values: these statements belong to the engine.
func (rt *runtime) stmtCtx() context.Context {
	now := time.Now()
	rt.stmtMu.Lock()
	defer rt.stmtMu.Unlock()
	if rt.stmt == nil || rt.stmtUntil.Sub(now) < rt.cfg.stmtTimeout/2 {
		// The previous context is left to expire by itself (statements still use it); the one
		// before it is past its deadline by now, and released.
		if c := rt.stmtCancel[1]; c != nil {
			c()
		}
		var cancel context.CancelFunc
		rt.stmtUntil = now.Add(rt.cfg.stmtTimeout)
		rt.stmt, cancel = context.WithDeadline(context.Background(), rt.stmtUntil)
		rt.stmtCancel = [2]context.CancelFunc{cancel, rt.stmtCancel[0]}
	}
	return rt.stmt
}

// stopStmts releases the statement contexts; the source is closing.
func (rt *runtime) stopStmts() {
	rt.stmtMu.Lock()
	defer rt.stmtMu.Unlock()
	for _, c := range rt.stmtCancel {
		if c != nil {
			c()
		}
	}
	rt.stmt, rt.stmtCancel = nil, [2]context.CancelFunc{}
}

// boundLocks makes the rest of tx give up a row-lock wait after the lock timeout, where the
// dialect can say so.
func (rt *runtime) boundLocks(ctx context.Context, tx Queryer) error {
	if rt.lockTx == "" {
		return nil
	}
	_, err := tx.Exec(ctx, rt.lockTx)
	return err
}

// begin starts a transaction whose row-lock waits are bounded.
func (rt *runtime) begin(ctx context.Context) (Transaction, error) {
	tx, err := rt.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := rt.boundLocks(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// waitReady waits for the poll interval, a wake-up, or ctx.
func (rt *runtime) waitReady(ctx context.Context, woken <-chan struct{}, extra <-chan struct{}) error {
	t := rt.clock.NewTimer(rt.cfg.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-extra:
	case <-t.C():
	}
	return nil
}

// closeListen ends the dialect's listener, the delayed wake-ups and the statement contexts.
func (rt *runtime) closeListen() {
	if rt.stopLn != nil {
		rt.stopLn()
	}
	rt.stopDelays()
	rt.stopStmts()
}

var errNotOwnDest = errors.New("sqlqueue: dead-letter destination differs from the subscription's DeadLetterAfter destination")

// wakeAfter wakes this process's claimants of a queue a settlement made a row ready in: the
// queue itself after a retry or an abandon, the dead-letter group after a move. They would
// otherwise find the row only at their next poll.
func (rt *runtime) wakeAfter(v core.Verdict) {
	switch {
	case v.Action == core.ActRetry || v.Action == core.ActAbandon:
		rt.wake.notify()
	case v.Action == core.ActRetryAfter && v.Delay < rt.cfg.poll:
		rt.wakeAt(v.Delay)
	case v.Action == core.ActDeadLetter && rt.s.Group != "":
		wakes.entry(rt.db, QueueRef{Table: rt.s.Table.Ref(), Group: v.Dest}).notify()
	}
}

// delayedWake is a wake-up armed for a row this process delayed.
type delayedWake struct {
	due time.Time
	t   clock.Timer
}

// wakeAt wakes this queue's claimants once a row delayed by d is ready, so that a delay
// shorter than the poll interval is not stretched to it. Rows delayed by other processes are
// found by polling.
func (rt *runtime) wakeAt(d time.Duration) {
	now := rt.clock.Now()
	rt.delayMu.Lock()
	defer rt.delayMu.Unlock()
	if rt.delaysClosed {
		return
	}
	live := rt.delays[:0]
	for _, w := range rt.delays {
		if w.due.After(now) {
			live = append(live, w)
		}
	}
	clear(rt.delays[len(live):])
	rt.delays = append(live, delayedWake{due: now.Add(d), t: rt.clock.AfterFunc(d, rt.wake.notify)})
}

// stopDelays disarms the delayed wake-ups; the source is closing.
func (rt *runtime) stopDelays() {
	rt.delayMu.Lock()
	defer rt.delayMu.Unlock()
	rt.delaysClosed = true
	for _, w := range rt.delays {
		w.t.Stop()
	}
	rt.delays = nil
}

// HoldsDelays reports whether a RetryAfter is kept in the row (a retry_after column, or a
// custom retry_after event), so that core turns a Backoff policy into delays (core.DelayHolder).
func (rt *runtime) HoldsDelays() bool {
	return rt.st.retryAfter != "" || rt.cfg.events[EventRetryAfter] != nil
}

func (l *lease) HoldsDelays() bool    { return l.rt.HoldsDelays() }
func (r *rowLock) HoldsDelays() bool  { return r.rt.HoldsDelays() }
func (a *advisory) HoldsDelays() bool { return a.rt.HoldsDelays() }

// Every form is a core source and finisher; deliveries give their handler a context of their
// own (transactional mode).
var (
	_ core.Source          = (*lease)(nil)
	_ core.Finisher        = (*lease)(nil)
	_ core.Source          = (*rowLock)(nil)
	_ core.Finisher        = (*rowLock)(nil)
	_ core.Source          = (*advisory)(nil)
	_ core.Finisher        = (*advisory)(nil)
	_ core.DeliveryContext = (*delivery)(nil)
	_ core.DelayHolder     = (*lease)(nil)
	_ core.DelayHolder     = (*rowLock)(nil)
	_ core.DelayHolder     = (*advisory)(nil)
	_ Transaction          = (*handlerTx)(nil)
)
