package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Open starts the form-neutral part of a subscription on q: it checks the table (and the
// dead-letter table) against the catalogue; the form then asks the dialect how its claims read
// the table (PinClaimIndex, OrderByGroup, NameKeysCanonically), renders its statements, calls
// Listen, and starts. With hints, nothing is asked of the database: the checks are skipped and
// the hints answer in the catalogue's place, for a subscription that only renders its
// statements (golden files) and never starts.
func Open(ctx context.Context, q *Queue, form driver.Form, sub core.Subscription, cfg Config, hints *Hints) (*Runtime, error) {
	rt := &Runtime{Q: q, S: q.Schema, D: q.D, DB: q.DB, Cfg: cfg, Sub: sub, Clock: sub.Clock, Form: form,
		Table: q.Schema.Table.Ref().String()}
	rt.Log = sub.Logger
	if rt.Log == nil {
		rt.Log = slog.New(slog.DiscardHandler)
	}
	rt.Log = rt.Log.With("table", rt.Table)
	if rt.Clock == nil {
		rt.Clock = clock.Real()
	}
	rt.Keys = rt.Table
	rt.deadlines.timeout = cfg.StmtTimeout
	rt.Holds.init(rt)
	if rl, ok := q.D.(driver.RowLocking); ok {
		rt.RowLocks = rl
		rt.LockTx, rt.LockSession = rl.LockTimeout(cfg.LockWait, false), rl.LockTimeout(cfg.LockWait, true)
	}
	rt.hints = hints
	if err := rt.check(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}

// check asks the catalogue for every column the description names.
func (rt *Runtime) check(ctx context.Context) error {
	t := rt.S.Table
	opts := rt.Sub.Options
	if rt.hints == nil {
		if err := driver.CheckColumns(ctx, rt.D, rt.DB, t, t.Ref()); err != nil {
			return err
		}
	}
	if opts.Cap > 0 && rt.S.Attempt == "" {
		return &driver.ColumnError{Table: rt.Table, Role: "attempt",
			Reason: fmt.Sprintf("DeadLetterAfter(%d, %q) needs an attempt column to count deliveries (Columns.Attempt)", opts.Cap, opts.DeadLetterTo)}
	}
	if opts.DeadLetterTo != "" && rt.S.Group == "" {
		ref, err := driver.ParseTableRef(opts.DeadLetterTo)
		if err != nil {
			return fmt.Errorf("sqlqueue: dead letter of table %s (no group column, so the destination is a table): %w", rt.Table, err)
		}
		if ref == t.Ref() {
			return fmt.Errorf("sqlqueue: table %s cannot be its own dead-letter table", rt.Table)
		}
		if rt.hints == nil {
			if err := driver.CheckColumns(ctx, rt.D, rt.DB, t, ref); err != nil {
				return fmt.Errorf("dead-letter table: %w", err)
			}
		}
		rt.DLRef = ref
	}
	return nil
}

// PinClaimIndex has the claims of a ClaimIndex dialect that locks rows read the table through
// the index the dialect names (Schema.ClaimHint).
func (rt *Runtime) PinClaimIndex(ctx context.Context) error {
	ci, ok := rt.D.(driver.ClaimIndex)
	if !ok || rt.RowLocks == nil {
		return nil
	}
	var leading []string
	for _, c := range []string{rt.S.Table.Columns.Group, rt.S.Table.Columns.ProcessedAt} {
		if c != "" {
			leading = append(leading, c)
		}
	}
	hint, err := "", error(nil)
	if rt.hints != nil {
		hint = rt.hints.ClaimHint
	} else {
		hint, err = ci.ClaimIndexHint(ctx, rt.DB, rt.S.Table.Ref(), leading)
	}
	if err != nil {
		return fmt.Errorf("sqlqueue: queue %q: choosing the index of table %s its claims read: %w", rt.Q.Name, rt.Table, err)
	}
	s := *rt.S
	s.ClaimHint = hint
	rt.S = &s
	return nil
}

// OrderByGroup has the looks for ready rows of a GroupOrder dialect compare the group as a
// range of one value and order by group, id, where the table's index allows (Schema.GroupOrder).
func (rt *Runtime) OrderByGroup(ctx context.Context) error {
	gd, ok := rt.D.(driver.GroupOrder)
	if !ok || rt.S.Group == "" {
		return nil
	}
	ordered, err := false, error(nil)
	if rt.hints != nil {
		ordered = rt.hints.GroupOrder
	} else {
		ordered, err = gd.GroupOrdered(ctx, rt.DB, rt.S.Table)
	}
	if err != nil {
		return fmt.Errorf("sqlqueue: queue %q: looking for the index of table %s its claims read: %w", rt.Q.Name, rt.Table, err)
	}
	if !ordered {
		rt.Log.Warn("sqlqueue: no index of the queue table starts with its group and id columns (the ready index of the dialect's CreateTable); its claims may read the table through the primary key, past every processed row and dead letter in front of the ready ones",
			"queue", rt.Q.Name, "group", rt.S.Group)
		return nil
	}
	s := *rt.S
	s.GroupOrder = true
	rt.S = &s
	return nil
}

// NameKeysCanonically names the subscription's keys (Keys) after the table as the server
// identifies it, where the dialect can say (TableIdentity), so that two spellings of one table
// share them.
func (rt *Runtime) NameKeysCanonically(ctx context.Context) error {
	ti, ok := rt.D.(driver.TableIdentity)
	if !ok {
		return nil
	}
	if rt.hints != nil {
		rt.Keys = rt.hints.Keys
		return nil
	}
	ref, err := ti.CanonicalTable(ctx, rt.DB, rt.S.Table.Ref())
	if err != nil {
		return fmt.Errorf("sqlqueue: queue %q: resolving table %s for its advisory keys: %w", rt.Q.Name, rt.Table, err)
	}
	rt.Keys = ref.String()
	return nil
}

// Listen registers the subscription's wake-up, and listens for the dialect's notifications of
// new rows (Notifier). Close ends both.
func (rt *Runtime) Listen(ctx context.Context) error {
	rt.Wake = wakes.acquire(rt.DB, rt.Q.Ref())
	if n, ok := rt.D.(driver.Notifier); ok {
		stop, err := n.Listen(ctx, rt.DB, rt.Q.Ref(), rt.Wake.Notify)
		if err != nil {
			rt.Wake.release()
			return fmt.Errorf("sqlqueue: queue %q: listening for wake-ups: %w", rt.Q.Name, err)
		}
		rt.stopListen = stop
	}
	return nil
}
