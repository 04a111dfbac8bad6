package sqlitepure

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/sqlitecore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sync is SQLite's synchronous setting.
type Sync string

const (
	// Full syncs the WAL on every commit: commits survive power loss. The default.
	Full Sync = "FULL"
	// Normal syncs at checkpoints only: safe against a crash of the process, but the last
	// commits may be lost on power loss.
	Normal Sync = "NORMAL"
)

// DB is settle's handle on one SQLite database file: a database/sql pool over
// modernc.org/sqlite and the dialect that spells statements for it. Register it with the App
// (app.Register(db)) so that it closes after the subscriptions; every endpoint and publisher of
// the file shares it.
type DB struct {
	pool    *sql.DB
	owned   bool
	q       sqlqueue.DB
	path    string
	dialect *dialect
	log     *slog.Logger
	clock   clock.Clock
}

var (
	_ core.Backend       = (*DB)(nil)
	_ core.HealthChecker = (*DB)(nil)
)

type options struct {
	sync    Sync
	busy    time.Duration
	maxOpen int
	log     *slog.Logger
	clock   clock.Clock
	// openOnly names the options given that configure a pool Open makes (New refuses them).
	openOnly []string
}

// Option configures Open or New.
type Option func(*options) error

// Synchronous sets the synchronous mode of a pool Open makes (default Full).
func Synchronous(s Sync) Option {
	return func(o *options) error {
		if s != Full && s != Normal {
			return fmt.Errorf("sqlitepure.Synchronous(%q): want sqlitepure.Full or sqlitepure.Normal", string(s))
		}
		o.sync = s
		o.openOnly = append(o.openOnly, "sqlitepure.Synchronous")
		return nil
	}
}

// BusyTimeout sets how long a statement of a pool Open makes waits for the write lock, and how
// long Open itself waits for another process that is setting the file up (default 5 s).
func BusyTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("sqlitepure.BusyTimeout(%v): must be positive", d)
		}
		o.busy = d
		o.openOnly = append(o.openOnly, "sqlitepure.BusyTimeout")
		return nil
	}
}

// MaxOpenConns bounds the connection pool Open makes (default 0: unbounded). Each
// advisory-form worker holds one connection.
func MaxOpenConns(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("sqlitepure.MaxOpenConns(%d): must not be negative", n)
		}
		o.maxOpen = n
		o.openOnly = append(o.openOnly, "sqlitepure.MaxOpenConns")
		return nil
	}
}

// WithLogger sets the logger of the DB's own events (Open waiting for another process that is
// setting the file up); default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("sqlitepure.WithLogger(nil): no logger")
		}
		o.log = l
		return nil
	}
}

// WithClock sets the clock of the DB's own timed paths (Open's waits for a locked file) and the
// default clock of the publishers NewPublisher makes (created_at, delays); default: the wall
// clock. Subscriptions take the App's clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("sqlitepure.WithClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

func buildOptions(fn string, opts []Option) (options, error) {
	o := options{sync: Full, busy: 5 * time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real()}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%s: nil option", fn)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Open opens (creating it if needed) the SQLite file at path and returns a DB that owns its
// pool: Close closes it. The pool's connections use WAL journaling, the busy timeout and
// BEGIN IMMEDIATE transactions, so that concurrent claimants queue for the write lock instead
// of failing on a lock upgrade. ctx bounds Open's own waits. An in-memory database is refused:
// every connection of the pool would see a database of its own.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlitepure.Open(%q): need a file path (an in-memory database is private to one connection)", path)
	}
	o, err := buildOptions("sqlitepure.Open", opts)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitepure.Open(%q): %w", path, err)
	}
	v := url.Values{}
	v.Set("_txlock", "immediate")
	v.Add("_pragma", "busy_timeout("+strconv.FormatInt(o.busy.Milliseconds(), 10)+")")
	v.Add("_pragma", "synchronous("+string(o.sync)+")")
	pool, err := sql.Open("sqlite", "file:"+abs+"?"+v.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitepure.Open(%q): %w", path, err)
	}
	pool.SetMaxOpenConns(o.maxOpen)
	pool.SetMaxIdleConns(max(o.maxOpen, 8))
	if err := useWAL(ctx, pool, o); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sqlitepure.Open(%q): %w", path, err)
	}
	return newDB(pool, true, abs, o), nil
}

// useWAL switches the file to WAL journaling (a setting kept in the file). The switch needs an
// exclusive lock, and SQLite answers "database is locked" at once, without its busy handler,
// when another connection is in the middle of setting the file up; Open then waits and tries
// again until the busy timeout.
func useWAL(ctx context.Context, pool *sql.DB, o options) error {
	deadline := o.clock.Now().Add(o.busy)
	wait := time.Duration(0)
	for {
		var mode string
		err := pool.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		switch {
		case err == nil && mode == "wal":
			return nil
		case err == nil:
			return fmt.Errorf("journal_mode is %q after asking for WAL", mode)
		case !IsTransient(err) || !o.clock.Now().Before(deadline):
			return fmt.Errorf("setting WAL journaling: %w", err)
		}
		wait = clock.Backoff(wait, time.Millisecond, 50*time.Millisecond)
		o.log.Debug("sqlitepure: the file is locked by another connection setting it up; trying again", "wait", wait, "error", err)
		if err := clock.Sleep(ctx, o.clock, wait); err != nil {
			return err
		}
	}
}

// New returns a DB over pool, which the caller keeps owning: Close leaves it open. The pool
// must be a modernc.org/sqlite pool (driver name "sqlite") on a database file whose
// transactions begin with BEGIN IMMEDIATE (_txlock=immediate in its DSN) and whose connections
// have a busy timeout (_pragma=busy_timeout(5000)); New checks all three, and refuses options
// that configure a pool Open makes (Synchronous, BusyTimeout, MaxOpenConns). ctx bounds the
// checks.
func New(ctx context.Context, pool *sql.DB, opts ...Option) (*DB, error) {
	if pool == nil {
		return nil, errors.New("sqlitepure.New: nil *sql.DB")
	}
	o, err := buildOptions("sqlitepure.New", opts)
	if err != nil {
		return nil, err
	}
	if len(o.openOnly) > 0 {
		return nil, fmt.Errorf("sqlitepure.New: option %s configures a pool that Open makes; set it on your own pool instead", o.openOnly[0])
	}
	if _, ok := pool.Driver().(*sqlite.Driver); !ok {
		return nil, fmt.Errorf("sqlitepure.New: the pool's driver is %T, not modernc.org/sqlite's (sql.Open(\"sqlite\", …)); IsTransient could not read its errors", pool.Driver())
	}
	path, err := checkPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	return newDB(pool, false, path, o), nil
}

// checkPool reads the file of pool's main database and checks the settings the engine relies
// on: a busy timeout, and transactions that take the write lock when they begin.
func checkPool(ctx context.Context, pool *sql.DB) (string, error) {
	var path string
	if err := pool.QueryRowContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path); err != nil {
		return "", fmt.Errorf("sqlitepure.New: reading the database file: %w", err)
	}
	if path == "" {
		return "", errors.New("sqlitepure.New: the pool's database is in memory or temporary; settle needs a file (every connection of the pool must see one database)")
	}
	var busy int
	if err := pool.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return "", fmt.Errorf("sqlitepure.New: reading busy_timeout: %w", err)
	}
	if busy <= 0 {
		return "", fmt.Errorf("sqlitepure.New: the pool's connections have no busy timeout (busy_timeout = %d): add _pragma=busy_timeout(5000) to its DSN, or every write that meets another fails at once", busy)
	}
	// BEGIN IMMEDIATE takes the write lock at once; a deferred BEGIN takes nothing. A second
	// connection, not waiting, then can or cannot take the write lock itself.
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("sqlitepure.New: beginning a transaction: %w", err)
	}
	defer tx.Rollback()
	probe := sql.OpenDB(connector{drv: pool.Driver(), name: path})
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	if _, err := probe.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return "", fmt.Errorf("sqlitepure.New: probing the pool's transactions: %w", err)
	}
	_, err = probe.ExecContext(ctx, "BEGIN IMMEDIATE")
	if err == nil {
		_, _ = probe.ExecContext(ctx, "ROLLBACK")
		return "", errors.New("sqlitepure.New: the pool begins deferred transactions: add _txlock=immediate to its DSN (a claim or a transactional handler that reads before it writes would fail with \"database is locked\" instead of waiting its turn)")
	}
	if !IsTransient(err) {
		return "", fmt.Errorf("sqlitepure.New: probing the pool's transactions: %w", err)
	}
	return path, nil
}

// connector opens connections of the driver of a pool New was given, on its file.
type connector struct {
	drv  sqldriver.Driver
	name string
}

func (c connector) Connect(context.Context) (sqldriver.Conn, error) { return c.drv.Open(c.name) }
func (c connector) Driver() sqldriver.Driver                        { return c.drv }

func newDB(pool *sql.DB, owned bool, path string, o options) *DB {
	keys := driver.LocalKeysFor(path)
	return &DB{pool: pool, owned: owned, q: &keyedDB{DB: sqlqueue.StdDB(pool), keys: keys},
		path: path, dialect: newDialect(keys), log: o.log, clock: o.clock}
}

// keyedDB is the pool as the engine sees it: database/sql's (sqlqueue.StdDB), with reserved
// connections that give up their advisory keys when discarded, as the engine requires of
// Conn.Discard.
type keyedDB struct {
	sqlqueue.DB
	keys *driver.LocalKeys
}

func (k *keyedDB) Conn(ctx context.Context) (driver.Conn, error) {
	c, err := k.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &sqlitecore.KeyedConn{Conn: c, Keys: k.keys}, nil
}

// Pool returns the database/sql pool, for the service's own statements.
func (db *DB) Pool() *sql.DB { return db.pool }

// Queue returns the DB as the engine's connection surface (sqlqueue.DB), for custom engines,
// outboxes and tests that use the engine's constructors directly.
func (db *DB) Queue() sqlqueue.DB { return db.q }

// Dialect returns the dialect the DB spells statements with.
func (db *DB) Dialect() sqlqueue.Dialect { return db.dialect }

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Close closes the pool if Open made it; a pool given to New stays open.
func (db *DB) Close() error {
	if db.owned {
		return db.pool.Close()
	}
	return nil
}

// CheckHealth reports whether the database file can be used (core.HealthChecker): a ping
// through the pool, bounded by ctx's deadline — pass "connected", or fail "unreachable" (a
// closed pool) with the error.
func (db *DB) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Name: "sqlite " + db.path, Status: core.HealthPass, State: "connected"}
	if err := db.pool.PingContext(ctx); err != nil {
		h.Status, h.State = core.HealthFail, "unreachable"
		h.Output, h.ErrorAt = err.Error(), db.clock.Now()
	}
	return h
}

// Lease returns the lease-form endpoint of the queue table t (group: the queue's group in a
// table with a group column, "" otherwise).
func Lease(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	return sqlqueue.NewLease(db.dialect, db.q, t, group)
}

// Advisory returns the advisory-lock-form endpoint of the queue table t. Keys live in this
// process (driver.LocalKeys): while a subscription runs, the process holds an exclusive lock
// on a companion file (the database file's name plus "-settle-keys"), and a subscription of
// another process on the same file is refused at start with an error matching
// driver.ErrKeysHeldElsewhere. Several processes on one file use the lease form.
func Advisory(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	ep, err := sqlqueue.NewAdvisory(db.dialect, db.q, t, group)
	if err != nil {
		return nil, err
	}
	return sqlitecore.HoldKeys(ep, db.dialect.Keys(), "sqlitepure"), nil
}

// NewPublisher returns a publisher for the queue table t (and group). Its clock is the DB's
// (WithClock) unless opts set one.
func NewPublisher(db *DB, t sqlqueue.Table, group string, opts ...sqlqueue.PublisherOption) (*sqlqueue.Publisher, error) {
	return sqlqueue.NewPublisher(db.dialect, db.q, t, group, append([]sqlqueue.PublisherOption{sqlqueue.PublishClock(db.clock)}, opts...)...)
}

// Tx returns the handler's delivery transaction in a subscription mounted with
// sqlqueue.Transactional().
func Tx(ctx context.Context) (*sql.Tx, error) { return sqlqueue.TxAs[*sql.Tx](ctx) }

// InTx publishes inside the caller's transaction.
func InTx(tx *sql.Tx) sqlqueue.PublishOption { return sqlqueue.InTx(sqlqueue.StdTx(tx)) }

// IsTransient reports whether err is SQLite's "database is locked" (SQLITE_BUSY or
// SQLITE_LOCKED, extended codes included, after the busy timeout): another connection held the
// write lock, and the same work can succeed if it is tried again. A handler that meets one
// returns core.Retry() (or RetryAfter) rather than failing for good.
func IsTransient(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	c := e.Code() & 0xff // the primary code of an extended one (SQLITE_BUSY_SNAPSHOT, …)
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}
