package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Option configures an Inbox.
type Option func(*Inbox) error

// WithLogger sets the inbox's logger (default: discard). Duplicates are logged at debug.
func WithLogger(l *slog.Logger) Option {
	return func(b *Inbox) error {
		if l == nil {
			return errors.New("inbox.WithLogger(nil): no logger")
		}
		b.log = l
		return nil
	}
}

// WithClock sets the clock of received_at and of the pruning (default: real). Give it the
// App's clock.
func WithClock(c clock.Clock) Option {
	return func(b *Inbox) error {
		if c == nil {
			return errors.New("inbox.WithClock(nil): no clock")
		}
		b.clock = c
		return nil
	}
}

// DefaultRetention is how long an inbox remembers a message id by default.
const DefaultRetention = 7 * 24 * time.Hour

// Retain keeps each recorded id for age, deleting older ones every `every` (default: seven
// days, every hour). The trade-off: a duplicate that arrives after age — a message redelivered
// or republished more than age after it was handled — is not recognised and runs the handler
// again. Keep age longer than the longest a message can come back: the broker's redelivery
// bound, retry-after delays, a dead letter's redrive, an outbox's relay after an outage.
func Retain(age, every time.Duration) Option {
	return func(b *Inbox) error {
		if age <= 0 || every <= 0 {
			return fmt.Errorf("inbox.Retain(%v, %v): the age and the interval must be positive", age, every)
		}
		b.retain, b.pruneEvery = age, every
		return nil
	}
}

// KeyFrom records key(d) instead of the delivery's id (Delivery.ID): an id of the sender's own
// that is stable where the transport's is not, such as an outbox record's
// (d.Headers()[outbox.HeaderID], prefixed with the sending service if several send). A delivery
// whose key is "" is handled without deduplication, in a transaction all the same, and logged
// as a warning.
func KeyFrom(key func(d core.Delivery) string) Option {
	return func(b *Inbox) error {
		if key == nil {
			return errors.New("inbox.KeyFrom(nil): no key function")
		}
		b.key = key
		return nil
	}
}

// OnDuplicate calls f for each duplicate acknowledged without the handler (a metrics counter);
// f runs on the delivery's goroutine and must be quick.
func OnDuplicate(f func(queue string, d core.Delivery)) Option {
	return func(b *Inbox) error {
		if f == nil {
			return errors.New("inbox.OnDuplicate(nil): no function")
		}
		b.onDup = f
		return nil
	}
}

// Inbox deduplicates the deliveries of broker subscriptions whose handlers write to the
// service's own SQL database. For each delivery it begins a transaction on that database and
// records the message's id in the inbox table inside it; the handler writes through the same
// transaction (Tx), and the inbox commits it when the handler returns nil, before the message
// is acknowledged. A delivery whose id is recorded already (its effects committed) is
// acknowledged without running the handler. If the commit fails, the handler's outcome becomes
// that error and the message is retried as the subscription's error policy says.
//
// Register it with the App (it is a core.Backend and core.Starter): at start it checks the
// table, and it prunes ids older than the retention (Retain) in the background.
type Inbox struct {
	d          sqlqueue.Dialect
	db         sqlqueue.DB
	table      sqlqueue.TableRef
	log        *slog.Logger
	clock      clock.Clock
	retain     time.Duration
	pruneEvery time.Duration
	key        func(core.Delivery) string
	onDup      func(string, core.Delivery)

	insert, prune string

	recorded, duplicates atomic.Int64

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

var (
	_ core.Backend = (*Inbox)(nil)
	_ core.Starter = (*Inbox)(nil)
)

// New returns an Inbox on table (optionally schema-qualified) of db, spelled by dialect d.
// Create the table with DDL. The dialect must declare its SQL family (sqlqueue.SQLFamily):
// PostgreSQL and SQLite record with INSERT … ON CONFLICT DO NOTHING, MySQL and MariaDB with
// INSERT IGNORE.
func New(d sqlqueue.Dialect, db sqlqueue.DB, table string, opts ...Option) (*Inbox, error) {
	if d == nil || db == nil {
		return nil, errors.New("inbox.New: a dialect and a database are required")
	}
	ref, err := sqlqueue.ParseTableRef(table)
	if err != nil {
		return nil, fmt.Errorf("inbox.New: table %q: %w", table, err)
	}
	b := &Inbox{d: d, db: db, table: ref, log: slog.New(slog.DiscardHandler), clock: clock.Real(),
		retain: DefaultRetention, pruneEvery: time.Hour, key: core.Delivery.ID}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("inbox.New(%s): option %d is nil", table, i)
		}
		if err := o(b); err != nil {
			return nil, err
		}
	}
	qt := qualified(d, ref)
	cols := " (" + d.Quote("id") + ", " + d.Quote("received_at") + ") VALUES (" + d.Placeholder(1) + ", " + d.Placeholder(2) + ")"
	switch f := sqlqueue.FamilyOf(d); f {
	case sqlqueue.FamilyPostgres, sqlqueue.FamilySQLite:
		b.insert = "INSERT INTO " + qt + cols + " ON CONFLICT DO NOTHING"
	case sqlqueue.FamilyMySQL, sqlqueue.FamilyMariaDB:
		b.insert = "INSERT IGNORE INTO " + qt + cols
	default:
		return nil, fmt.Errorf("inbox.New(%s): dialect %s declares SQL family %q; an inbox needs postgres, sqlite, mysql or mariadb (an insert that does nothing on a duplicate key)", table, d.Name(), f)
	}
	b.prune = "DELETE FROM " + qt + " WHERE " + d.Quote("received_at") + " < " + d.Placeholder(1)
	return b, nil
}

func qualified(d sqlqueue.Dialect, ref sqlqueue.TableRef) string {
	if ref.Schema != "" {
		return d.Quote(ref.Schema) + "." + d.Quote(ref.Name)
	}
	return d.Quote(ref.Name)
}

// Receive is the subscription option that puts the inbox in front of the handler:
//
//	core.Subscribe(app, payments, handle, box.Receive())
func (b *Inbox) Receive() core.Option { return core.Use(b.Middleware) }

// Stats counts what the inbox did since it was made.
type Stats struct {
	// Recorded counts ids recorded with a committed handler transaction.
	Recorded int64
	// Duplicates counts deliveries acknowledged without the handler: their id was recorded.
	Duplicates int64
}

// Stats returns the inbox's counts.
func (b *Inbox) Stats() Stats {
	return Stats{Recorded: b.recorded.Load(), Duplicates: b.duplicates.Load()}
}

// maxKey is the longest id stored as it is: MySQL and MariaDB index at most 191 characters of
// utf8mb4 text. A longer id is stored as its SHA-256 (INSERT IGNORE would truncate it, and two
// long ids with one prefix would collide).
const maxKey = 191

func storedKey(k string) string {
	if len(k) <= maxKey {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DDL returns the CREATE TABLE statement of an inbox table named table for dialect d, from the
// column types d declares (sqlqueue.DDLTypes): id (text, the primary key) and received_at.
func DDL(d sqlqueue.Dialect, table string) (string, error) {
	ref, err := sqlqueue.ParseTableRef(table)
	if err != nil {
		return "", fmt.Errorf("inbox.DDL: table %q: %w", table, err)
	}
	if err := sqlqueue.CheckIdentifier(d, "inbox table name", ref.Name); err != nil {
		return "", err
	}
	dt, ok := d.(sqlqueue.DDLTypes)
	if !ok {
		return "", fmt.Errorf("inbox.DDL: dialect %s declares no column types (sqlqueue.DDLTypes); create table %s yourself with the columns id (text of up to 191 characters, the primary key) and received_at (a time as the dialect stores it)", d.Name(), table)
	}
	ty, q := dt.DDLTypes(), d.Quote
	return "CREATE TABLE IF NOT EXISTS " + qualified(d, ref) + " (\n" +
		"  " + q("id") + " " + ty.Text + " NOT NULL PRIMARY KEY,\n" +
		"  " + q("received_at") + " " + ty.Time + " NOT NULL\n)" + ty.TableOptions, nil
}

// Start checks that the table exists and starts pruning.
func (b *Inbox) Start(ctx context.Context) error {
	cols, err := b.d.Columns(ctx, b.db, b.table)
	if err != nil {
		return fmt.Errorf("inbox: reading the columns of table %s: %w", b.table, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("inbox: table %s does not exist (create it with inbox.DDL)", b.table)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		return errors.New("inbox: started already")
	}
	pctx, stop := context.WithCancel(context.Background())
	b.stop, b.done = stop, make(chan struct{})
	go b.pruning(pctx)
	return nil
}

// Close stops the pruning.
func (b *Inbox) Close() error {
	b.mu.Lock()
	stop, done := b.stop, b.done
	b.stop = nil
	b.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	return nil
}

func (b *Inbox) pruning(ctx context.Context) {
	defer close(b.done)
	for clock.Sleep(ctx, b.clock, b.pruneEvery) == nil {
		if _, err := b.Prune(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("inbox: pruning old ids failed; trying again at the next interval", "table", b.table.String(), "error", err)
		}
	}
}

// Prune deletes the ids recorded more than the retention ago, and returns how many.
func (b *Inbox) Prune(ctx context.Context) (int64, error) {
	r, err := b.db.Exec(ctx, b.prune, b.now(b.clock.Now().Add(-b.retain)))
	if err != nil {
		return 0, fmt.Errorf("inbox: pruning table %s: %w", b.table, err)
	}
	return r.RowsAffected, nil
}

func (b *Inbox) now(t time.Time) any { return b.d.Time(t.UTC().Truncate(time.Microsecond)) }
