package sqlqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// Defaults of the mount options.
const (
	// DefaultLease is how long a lease-form claim holds a row before another claim may take
	// it; the engine extends it at half its length while the handler works.
	DefaultLease = engine.DefaultLease
	// DefaultPollInterval is how long a claimant waits after finding the queue empty, unless
	// a publish wakes it first.
	DefaultPollInterval = engine.DefaultPollInterval
	// DefaultFlushLinger bounds how long a finished delivery waits for others to share its
	// settlement statement.
	DefaultFlushLinger = engine.DefaultFlushLinger
	// DefaultMaxFlush is the most deliveries settled by one grouped flush.
	DefaultMaxFlush = engine.DefaultMaxFlush
	// DefaultLockTimeout bounds how long a settling statement waits for a row another session
	// holds locked (lease form: at most a quarter of the lease).
	DefaultLockTimeout = engine.DefaultLockTimeout
	// DefaultMaxBatch is the largest claim the lease and row-lock forms make when no BatchSize
	// is given: claims start at 10 rows per worker (at most 100) and grow while the workers get
	// through them fast. It equals DefaultMaxFlush, so that a claim's settlements fit one grouped
	// statement; a smaller FlushLimits lowers it to that limit.
	DefaultMaxBatch = engine.DefaultMaxBatch
	// DefaultStatementTimeout bounds every statement the engine runs in the background.
	DefaultStatementTimeout = engine.DefaultStatementTimeout
)

// option makes an engine mount option; name spells it in errors (core refuses it, naming it, on
// an endpoint of another backend).
// option makes an engine mount option, one of those forms read or refuse (engine.Option); name
// spells it in errors (core refuses it, naming it, on an endpoint of another backend).
func option(opt engine.Option, name string, f func(c *engine.Config) error) core.Option {
	return core.OptionFunc(func(o *core.Options) error {
		var c *engine.Config
		if v, ok := o.Ext(engine.ConfigKey{}); ok {
			c = v.(*engine.Config)
		} else {
			c = engine.DefaultConfig()
		}
		if err := f(c); err != nil {
			return err
		}
		c.Given |= opt
		o.SetExt(engine.ConfigKey{}, name, c)
		return nil
	})
}

// Transactional gives the handler its delivery's transaction: sqlqueue.Tx(ctx), or the
// dialect's typed accessor (sqlite.Tx). Ack commits the handler's writes together with the
// settlement; every other outcome rolls them back first (a savepoint in the row-lock form),
// then settles. In the lease form the transaction begins on first use, and a lost lease rolls
// everything back and reports ErrLeaseLost.
func Transactional() core.Option {
	return option(engine.OptTransactional, "sqlqueue.Transactional()", func(c *engine.Config) error { c.Transactional = true; return nil })
}

// LeaseFor sets the lease-form lease (default 30 s). The engine extends it at half its length
// while the handler works; d must be positive. The row-lock and advisory forms refuse it when
// the subscription starts (they hold no lease).
func LeaseFor(d time.Duration) core.Option {
	return option(engine.OptLeaseFor, "sqlqueue.LeaseFor", func(c *engine.Config) error {
		if d <= 0 {
			return fmt.Errorf("sqlqueue.LeaseFor(%v): the lease must be positive", d)
		}
		c.Lease = d
		return nil
	})
}

// BatchSize sets how many rows one claim takes. The claimed rows wait for free workers, their
// leases extended, and in the row-lock form all of them settle with one commit. By default a
// claim takes 10 rows per worker, at most 100; in the lease and row-lock forms that is the base
// from which claims grow: while they come back full and the workers get through each in
// under 100 ms, each claim makes the next as large as what the workers would get through in
// 100 ms at the rate they showed (at least twice, at most eight times as large), up to
// DefaultMaxBatch (or the FlushLimits maximum, when smaller), and halve back towards the base when they take
// over 400 ms (the lease form also when they come back less than half full), so fast handlers
// share a claim's transaction among many rows and slow ones hold few. While claims come back
// full and fast, the next claim is also made ahead of the workers, while they handle the
// current one, so that they do not wait for it: a process then holds up to two claims. A
// BatchSize fixes the size and turns claiming ahead off. (The row-lock form always starts a
// process at one row and doubles from there, so that a row that crashes the process ends up
// claimed alone.)
func BatchSize(n int) core.Option {
	return option(engine.OptBatchSize, "sqlqueue.BatchSize", func(c *engine.Config) error {
		if n < 1 {
			return fmt.Errorf("sqlqueue.BatchSize(%d): need at least 1", n)
		}
		c.Batch = n
		return nil
	})
}

// PollInterval sets how long a claimant waits after finding no ready row (default 1 s). A
// publish through a Publisher of the same process, or a dialect's notification, wakes it at
// once.
func PollInterval(d time.Duration) core.Option {
	return option(engine.OptPollInterval, "sqlqueue.PollInterval", func(c *engine.Config) error {
		if d <= 0 {
			return fmt.Errorf("sqlqueue.PollInterval(%v): the interval must be positive", d)
		}
		c.Poll = d
		return nil
	})
}

// CountAtClaim sets how the row-lock form counts attempts. On: every claim first commits
// attempt + 1 on the rows it picks, in a short transaction of its own, then locks them again
// by id in the claim transaction, so that a crash (which rolls the claim transaction back) does
// not undo the count and DeadLetterAfter ends a crash loop. Off: the attempt is counted by the
// settling statement, inside the claim transaction, which a crash rolls back.
//
// Without the option, a subscription with DeadLetterAfter counts at claim while its claims are
// smaller than BatchSize — after it starts, and after a claim that failed, when the claim size
// is ramping up from one row (see the package doc) — and not in full-size claims. A process
// restarted after a crash claims the oldest rows, where the poison row is, in those small
// counted claims, so a crash loop still ends at the cap (a poison row first met in a full claim
// runs at most once more than the cap), while the steady state costs nothing. A subscription
// without DeadLetterAfter does not count at claim.
//
// Counting at every claim costs a second commit per claim and an UPDATE of its rows: measured
// on PostgreSQL 15 with claims of 100 rows, a drain ran at about a third of the rate without it
// (bench/README.md); with PerMessage (a claim per row) it doubles the commits. A row that
// another claimant takes between the two transactions is left to it and counted again there:
// an attempt spent without a handler run, never two handlers at once. The lease and advisory
// forms always count at claim, and refuse the option. Counting at claim needs a dialect that can lock rows by id
// (RowLocking: PostgreSQL, MySQL, MariaDB), and does not apply to a custom claim event, whose
// SQL counts as it likes.
func CountAtClaim(on bool) core.Option {
	return option(engine.OptCountAtClaim, "sqlqueue.CountAtClaim", func(c *engine.Config) error {
		c.Count = -1
		if on {
			c.Count = 1
		}
		return nil
	})
}

// PerMessage settles every delivery with its own statement and commit instead of grouping
// settlements: the lease form then commits once per message and the row-lock form claims one
// row per transaction. It costs throughput (one commit per message caps a queue at a few
// thousand messages a second) and buys the shortest time between a handler's return and its
// durable settlement. The advisory form, which settles every delivery on its own anyway,
// refuses it.
func PerMessage() core.Option {
	return option(engine.OptPerMessage, "sqlqueue.PerMessage()", func(c *engine.Config) error { c.PerMessage = true; return nil })
}

// FlushLimits bounds grouped settlement in the lease form: one flush settles at most max
// deliveries, and a finished delivery waits at most linger (on the App's clock) for others to
// share its flush. A flush also starts at once when every claimed delivery of the subscription
// has finished and no claim is coming to settle them in its own transaction (the claimant waits
// for rows, or the subscription is stopping). Defaults: 500 and 20 ms. The row-lock form reads
// max only (a claim's grouped settlement goes in statements of at most max rows); the advisory
// form, which settles each delivery at once, refuses the option.
func FlushLimits(max int, linger time.Duration) core.Option {
	return option(engine.OptFlushLimits, "sqlqueue.FlushLimits", func(c *engine.Config) error {
		if max < 1 {
			return fmt.Errorf("sqlqueue.FlushLimits(%d, %v): max must be at least 1", max, linger)
		}
		if linger < 0 {
			return fmt.Errorf("sqlqueue.FlushLimits(%d, %v): linger must not be negative", max, linger)
		}
		c.MaxFlush, c.Linger = max, linger
		return nil
	})
}

// LockTimeout bounds how long a statement that settles or extends a delivery waits for a row
// lock another session holds (a service's own SELECT … FOR UPDATE on a claimed row), on a
// dialect that can say so (RowLocking: PostgreSQL lock_timeout, MySQL/MariaDB
// innodb_lock_wait_timeout); after d the statement fails and the settlement is reported failed
// (see the package doc on failing settlements). Default 5 s; in the lease form at most a
// quarter of the lease, so that an extension that had to wait still writes a lease end well
// in the future.
func LockTimeout(d time.Duration) core.Option {
	return option(engine.OptLockTimeout, "sqlqueue.LockTimeout", func(c *engine.Config) error {
		if d <= 0 {
			return fmt.Errorf("sqlqueue.LockTimeout(%v): the timeout must be positive", d)
		}
		c.LockWait = d
		return nil
	})
}

// StatementTimeout bounds every statement the engine runs in the background rather than for a
// caller that waits: grouped settlements, lease extensions, advisory unlocks, and the rows
// given back when a subscription stops (default 30 s). A statement past it is cancelled and
// reported as failed, so that nothing blocks a subscription's Close forever.
func StatementTimeout(d time.Duration) core.Option {
	return option(engine.OptStatementTimeout, "sqlqueue.StatementTimeout", func(c *engine.Config) error {
		if d <= 0 {
			return fmt.Errorf("sqlqueue.StatementTimeout(%v): the timeout must be positive", d)
		}
		c.StmtTimeout = d
		return nil
	})
}

// AdvisoryKey sets the SQL expression over the queue table's columns whose value keys the
// advisory lock of a row (default: the id column). Rows with the same key are worked one at a
// time. The expression is the user's own SQL and is spliced as given. The lease and row-lock
// forms refuse it.
func AdvisoryKey(expr string) core.Option {
	return option(engine.OptAdvisoryKey, "sqlqueue.AdvisoryKey", func(c *engine.Config) error {
		if strings.TrimSpace(expr) == "" {
			return errors.New("sqlqueue.AdvisoryKey(\"\"): the key expression is empty")
		}
		c.AdvisoryKey = expr
		return nil
	})
}

// EventKind names a statement a subscription may replace with its own.
type EventKind = engine.EventKind

// The statements a custom event may replace.
const (
	// EventClaim replaces the claim: its last statement must return the claimed rows' id,
	// payload, attempt and headers (NULL when absent), in that order; in the lease form it
	// must stamp locked_until = EventInput.Token.
	EventClaim = engine.EventClaim
	// EventAck replaces the statement of an ack.
	EventAck = engine.EventAck
	// EventDrop replaces the statement of a drop.
	EventDrop = engine.EventDrop
	// EventRetry replaces the statement of a retry.
	EventRetry = engine.EventRetry
	// EventRetryAfter replaces the statement of a retry after a delay.
	EventRetryAfter = engine.EventRetryAfter
	// EventDeadLetter replaces the move to the dead letter.
	EventDeadLetter = engine.EventDeadLetter
)

// EventInput is what a custom event is told. It is plain data, so an out-of-process plugin can
// receive it and answer with statements.
type EventInput struct {
	Kind EventKind
	Form Form
	// Dialect is the family of SQL the dialect declares (FamilyOf: "sqlite", "postgres",
	// "mysql", "mariadb"), which the statements' grammar, types and functions follow; "" for a
	// dialect that declares none (never its Name). Placeholders are the dialect's own (Placeholder: ? or
	// $n), whatever the family.
	Dialect string
	// Queue and Table name where the row lives.
	Queue string
	Table TableRef
	// Group is the queue's group in a table with a group column.
	Group string
	// Now is the engine's current time.
	Now time.Time
	// ID and Attempt identify the delivery (not set for EventClaim).
	ID      int64
	Attempt int
	// Token is the delivery's lease (lease form); for EventClaim, the lease to stamp.
	Token time.Time
	// RetryAfter is when a retried row becomes ready again (EventRetryAfter).
	RetryAfter time.Time
	// Dest is the dead-letter group or table (EventDeadLetter).
	Dest string
	// Limit is the most rows to claim (EventClaim).
	Limit int
	// Reason is why the attempt failed (core.Reason of the outcome), for EventRetry,
	// EventRetryAfter and EventDeadLetter: what the engine writes into the last_error column.
	Reason string
}

// Statement is one SQL statement with its arguments. time.Time arguments are converted with
// the dialect's Time, so they compare with the engine's own timestamps.
type Statement struct {
	SQL  string
	Args []any
	// Wrap, when set, wraps the error the statement fails with, so that the error names where
	// the statement came from (eventplugin wraps it in an *eventplugin.Error naming the plugin).
	Wrap func(error) error
}

// Event returns the statements that replace one of the dialect's. They run in place of the
// dialect's: in the same transaction (lease flush, row-lock claim) or on the same connection
// (advisory). In the lease form, statements that together change no row report ErrLeaseLost.
// A custom finishing statement is run per delivery, outside grouped settlement.
type Event func(ctx context.Context, in EventInput) ([]Statement, error)

// OnEvent replaces the dialect's statement for kind with ev.
func OnEvent(kind EventKind, ev Event) core.Option {
	return option(engine.OptOnEvent, "sqlqueue.OnEvent", func(c *engine.Config) error {
		if kind >= engine.NumEvents {
			return fmt.Errorf("sqlqueue.OnEvent(%d): unknown event kind", kind)
		}
		if ev == nil {
			return fmt.Errorf("sqlqueue.OnEvent(%v, nil): no event function", kind)
		}
		c.Events[kind] = adaptEvent(ev)
		return nil
	})
}

// adaptEvent is ev as the engine runs it: EventInput and Statement have the engine's fields.
func adaptEvent(ev Event) engine.Event {
	return func(ctx context.Context, in engine.EventInput) ([]engine.Statement, error) {
		stmts, err := ev(ctx, EventInput(in))
		if err != nil {
			return nil, err
		}
		out := make([]engine.Statement, len(stmts))
		for i, s := range stmts {
			out[i] = engine.Statement(s)
		}
		return out, nil
	}
}
