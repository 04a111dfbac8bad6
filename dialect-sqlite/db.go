package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
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

// DB is an open SQLite database with settle's settings; register it with the App
// (app.Register(db)) so that it closes after the subscriptions.
type DB struct {
	sql     *sql.DB
	q       sqlqueue.DB
	path    string
	dialect *Dialect
}

type config struct {
	sync    Sync
	busy    time.Duration
	maxOpen int
}

// Option configures Open.
type Option func(*config) error

// Synchronous sets the synchronous mode (default Full).
func Synchronous(s Sync) Option {
	return func(c *config) error {
		if s != Full && s != Normal {
			return fmt.Errorf("sqlite.Synchronous(%q): want sqlite.Full or sqlite.Normal", string(s))
		}
		c.sync = s
		return nil
	}
}

// BusyTimeout sets how long a statement waits for the write lock (default 5 s).
func BusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("sqlite.BusyTimeout(%v): must be positive", d)
		}
		c.busy = d
		return nil
	}
}

// MaxOpenConns bounds the connection pool (default 0: unbounded). Each advisory-form worker
// holds one connection.
func MaxOpenConns(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("sqlite.MaxOpenConns(%d): must not be negative", n)
		}
		c.maxOpen = n
		return nil
	}
}

// Open opens (creating it if needed) the SQLite file at path. An in-memory database is
// refused: every connection of the pool would see a database of its own.
func Open(path string, opts ...Option) (*DB, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlite.Open(%q): need a file path (an in-memory database is private to one connection)", path)
	}
	c := config{sync: Full, busy: 5 * time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("sqlite.Open: nil option")
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite.Open(%q): %w", path, err)
	}
	v := url.Values{}
	v.Set("_txlock", "immediate")
	v.Set("_journal_mode", "WAL")
	v.Set("_busy_timeout", strconv.FormatInt(c.busy.Milliseconds(), 10))
	v.Set("_synchronous", string(c.sync))
	db, err := sql.Open("sqlite3", "file:"+abs+"?"+v.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite.Open(%q): %w", path, err)
	}
	db.SetMaxOpenConns(c.maxOpen)
	db.SetMaxIdleConns(max(c.maxOpen, 8))
	if err := db.PingContext(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite.Open(%q): %w", path, err)
	}
	return &DB{sql: db, q: &lockedDB{db: sqlqueue.StdDB(db), w: writers.get(abs, c.busy)}, path: abs, dialect: &Dialect{path: abs}}, nil
}

// writers holds one writer per database file, shared by every DB opened on it in the process.
var writers = &writerSet{m: make(map[string]*writer)}

type writerSet struct {
	sync.Mutex
	m map[string]*writer
}

func (ws *writerSet) get(path string, busy time.Duration) *writer {
	ws.Lock()
	defer ws.Unlock()
	w := ws.m[path]
	if w == nil {
		w = newWriter(busy)
		ws.m[path] = w
	}
	return w
}

// SQL returns the database/sql pool, for the service's own queries.
func (db *DB) SQL() *sql.DB { return db.sql }

// Queue returns the pool as the engine sees it.
func (db *DB) Queue() sqlqueue.DB { return db.q }

// Dialect returns the dialect of this database.
func (db *DB) Dialect() *Dialect { return db.dialect }

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Close closes the pool.
func (db *DB) Close() error { return db.sql.Close() }

// Lease returns the lease-form endpoint of the queue table t (group: the queue's group in a
// table with a group column, "" otherwise).
func Lease(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	return sqlqueue.NewLease(db.dialect, db.q, t, group)
}

// Advisory returns the advisory-lock-form endpoint of the queue table t. Keys serialise within
// this process only.
func Advisory(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	return sqlqueue.NewAdvisory(db.dialect, db.q, t, group)
}

// NewPublisher returns a publisher for the queue table t (and group).
func NewPublisher(db *DB, t sqlqueue.Table, group string, opts ...sqlqueue.PublisherOption) (*sqlqueue.Publisher, error) {
	return sqlqueue.NewPublisher(db.dialect, db.q, t, group, opts...)
}

// Tx returns the handler's delivery transaction in a subscription mounted with
// sqlqueue.Transactional().
func Tx(ctx context.Context) (*sql.Tx, error) { return sqlqueue.TxAs[*sql.Tx](ctx) }

// InTx publishes inside the caller's transaction.
func InTx(tx *sql.Tx) sqlqueue.PublishOption { return sqlqueue.InTx(sqlqueue.StdTx(tx)) }

// IsBusy reports whether err is SQLite's "database is locked" after the busy timeout.
func IsBusy(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && (e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked)
}
