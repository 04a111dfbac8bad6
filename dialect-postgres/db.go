package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// MinServerVersion is the oldest PostgreSQL the dialect accepts, as server_version_num:
// 11 brought hashtextextended, the default advisory key function; SKIP LOCKED and
// DELETE … RETURNING in a WITH clause are older.
const MinServerVersion = 110000

// discardTimeout bounds closing a connection that is being thrown away.
const discardTimeout = 5 * time.Second

// DB is settle's handle on one PostgreSQL database: a pgxpool.Pool, the dialect that spells
// statements for it and, with Notify(true), its one LISTEN connection. Register it with the
// App (app.Register(db)) so that Run checks the server before subscriptions open and closes it
// after they stop; every endpoint and publisher of the database shares it.
type DB struct {
	pool    *pgxpool.Pool
	owned   bool
	notify  bool
	keyFunc string
	log     *slog.Logger
	clock   clock.Clock
	dialect sqlqueue.Dialect
	adapter *poolDB

	mu       sync.Mutex
	reserved int // connections held by advisory subscriptions

	lisOnce sync.Once
	lis     *listener
	closed  sync.Once
}

var (
	_ core.Backend = (*DB)(nil)
	_ core.Starter = (*DB)(nil)
)

// options are what the Options set.
type options struct {
	notify  bool
	keyFunc string
	log     *slog.Logger
	clock   clock.Clock
}

// Option configures Open or New.
type Option func(*options) error

// Notify makes every publish through the DB send pg_notify in its transaction, and every
// subscription opened on the DB listen for it, so that rows published by any process wake
// the table's subscriptions at once instead of at their next poll (default false: polling,
// plus immediate wake-ups for publishes in the same process).
func Notify(on bool) Option { return func(o *options) error { o.notify = on; return nil } }

// AdvisoryKeyFunc sets the SQL function that turns an advisory key (the row's key expression,
// read as text) into the bigint that pg_try_advisory_lock takes; format has one %s for the
// text (default "hashtextextended(%s, 0)").
func AdvisoryKeyFunc(format string) Option {
	return func(o *options) error {
		if strings.Count(format, "%s") != 1 || strings.Count(format, "%") != 1 {
			return fmt.Errorf("postgres.AdvisoryKeyFunc(%q): the format needs exactly one %%s and no other verb", format)
		}
		o.keyFunc = format
		return nil
	}
}

// WithLogger sets the logger of the DB's own events (listener reconnects); default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("postgres.WithLogger(nil): no logger")
		}
		o.log = l
		return nil
	}
}

// WithClock sets the clock of the DB's own timed paths (the listener's reconnect backoff) and
// the default clock of the publishers NewPublisher makes (created_at, delays); default: the
// wall clock. Subscriptions take the App's clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("postgres.WithClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// New returns a DB over pool, which the caller keeps owning: Close leaves it open. New does
// not contact the server (ctx is for the signature every dialect shares); Start, called by
// App.Run for a registered DB, checks the server's version.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*DB, error) {
	if pool == nil {
		return nil, errors.New("postgres.New: nil pool")
	}
	o := options{keyFunc: defaultKeyFunc, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real()}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("postgres.New: nil option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	db := &DB{pool: pool, notify: o.notify, keyFunc: o.keyFunc, log: o.log, clock: o.clock}
	db.adapter = &poolDB{pool: pool}
	d := newDialect(db.keyFunc)
	d.log = o.log
	if db.notify {
		db.dialect = &notifyDialect{dialect: d, db: db}
	} else {
		db.dialect = d
	}
	return db, nil
}

// Open connects a pool to url (a PostgreSQL URL or key=value DSN; pool settings such as
// pool_max_conns go in it) and returns a DB that owns it: Close closes the pool. Like New it
// does not wait for the server; Start checks it.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("postgres.Open: %w", err)
	}
	db, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	db.owned = true
	return db, nil
}

// Pool returns the DB's pool, for the service's own statements.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Dialect returns the dialect the DB spells statements with; custom engines and tests use it
// with the engine's sqlqueue constructors.
func (db *DB) Dialect() sqlqueue.Dialect { return db.dialect }

// Queue returns the DB as the engine's connection surface (sqlqueue.DB), for custom engines,
// outboxes and tests that use the engine's constructors directly.
func (db *DB) Queue() sqlqueue.DB { return db.adapter }

// Start checks that the server answers and is PostgreSQL 11 or later.
func (db *DB) Start(ctx context.Context) error {
	v, err := ServerVersion(ctx, db.pool)
	if err != nil {
		return fmt.Errorf("postgres: %w", err) // a server not reached at start: not a lost connection
	}
	return checkVersion(v)
}

func checkVersion(v int) error {
	if v < MinServerVersion {
		return fmt.Errorf("postgres: server version %s (server_version_num %d) is too old: settle needs PostgreSQL %d or later (hashtextextended for advisory keys)",
			versionString(v), v, MinServerVersion/10000)
	}
	return nil
}

// versionString spells a server_version_num as PostgreSQL does: 15.4, or 9.6.24 before 10.
func versionString(v int) string {
	if v >= 100000 {
		return strconv.Itoa(v/10000) + "." + strconv.Itoa(v%10000)
	}
	return strconv.Itoa(v/10000) + "." + strconv.Itoa(v/100%100) + "." + strconv.Itoa(v%100)
}

// ServerVersion returns the server's server_version_num (150004 for 15.4).
func ServerVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var s string
	if err := pool.QueryRow(ctx, "SHOW server_version_num").Scan(&s); err != nil {
		return 0, fmt.Errorf("read server version: %w", err)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("read server version: %q is not a number", s)
	}
	return v, nil
}

// Close stops the listener and, for a DB made by Open, closes the pool. It is idempotent.
func (db *DB) Close() error {
	db.closed.Do(func() {
		if db.lis != nil {
			db.lis.stop()
		}
		if db.owned {
			db.pool.Close()
		}
	})
	return nil
}

// reserve counts n dedicated connections for the advisory subscription name, refusing them
// when the pool could then not serve a candidate query.
func (db *DB) reserve(name string, n int) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	max := int(db.pool.Config().MaxConns)
	if db.reserved+n+1 > max {
		return fmt.Errorf("postgres: advisory subscription %q keeps one connection per worker (%d) and needs one more for its candidate queries, "+
			"but the pool allows %d connections and other advisory subscriptions keep %d: raise pool_max_conns to at least %d or lower Workers",
			name, n, max, db.reserved, db.reserved+n+1)
	}
	db.reserved += n
	return nil
}

func (db *DB) unreserve(n int) {
	db.mu.Lock()
	db.reserved -= n
	db.mu.Unlock()
}

func (db *DB) listener() *listener {
	db.lisOnce.Do(func() { db.lis = &listener{db: db, log: db.log} })
	return db.lis
}
