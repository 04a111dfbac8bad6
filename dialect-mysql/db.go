package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// DB is a MySQL or MariaDB database as settle uses it: a database/sql pool over
// go-sql-driver/mysql, the server's flavour and version, and the database the queue tables
// live in. It is the sqlqueue.DB the engine runs statements on, and a core.Backend: register
// it with the App (app.Register(db)) so that it is closed after the subscriptions stop.
//
// Claim transactions run at READ COMMITTED by default (see Isolation): InnoDB then locks only
// the rows a claim takes, so claimants never wait on each other's gap locks and publishers
// never wait on claimants.
type DB struct {
	pool     *sql.DB
	owned    bool
	version  Version
	database string
	iso      sql.IsolationLevel
	txOpts   *sql.TxOptions // set when each transaction must ask for the isolation level itself
	dialect  *dialect
	q        *queueDB
	log      *slog.Logger
	clock    clock.Clock
}

var _ core.Backend = (*DB)(nil)

// Option configures Open or New.
type Option func(*options) error

// options are what the Options set.
type options struct {
	iso   sql.IsolationLevel
	log   *slog.Logger
	clock clock.Clock
}

// WithLogger sets the logger of the DB's own events (a claim run again after InnoDB chose it
// as a deadlock victim, at debug level; an advisory unlock the server did not confirm, as a
// warning); default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("mysql.WithLogger(nil): no logger")
		}
		o.log = l
		return nil
	}
}

// WithClock sets the default clock of the publishers NewPublisher makes (created_at, delays);
// default: the wall clock. Subscriptions take the App's clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("mysql.WithClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// Isolation sets the isolation level of every transaction settle begins: claims, settlements,
// dead-letter moves and the handler's transaction in transactional mode. The default is
// sql.LevelReadCommitted. sql.LevelRepeatableRead (the server default) makes a claim's
// SELECT … FOR UPDATE take gap locks, so publishers wait for claim transactions to end;
// sql.LevelSerializable adds shared locks to plain reads in transactional handlers;
// sql.LevelDefault leaves the server's setting alone. Other levels are refused.
func Isolation(level sql.IsolationLevel) Option {
	return func(o *options) error {
		switch level {
		case sql.LevelDefault, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable:
			o.iso = level
			return nil
		}
		return fmt.Errorf("mysql: Isolation(%v): settle's claims need READ COMMITTED, REPEATABLE READ or SERIALIZABLE (or sql.LevelDefault for the server's setting)", level)
	}
}

func buildOptions(fn string, opts []Option) (options, error) {
	o := options{iso: sql.LevelReadCommitted, log: slog.New(slog.DiscardHandler), clock: clock.Real()}
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

// Open connects to the database named by dsn (go-sql-driver/mysql's format:
// "user:password@tcp(host:3306)/dbname?parseTime=true"), detects the server's flavour and
// version, and returns a DB that owns its pool (Close closes it).
//
// Every connection of the pool is set up for settle once, when it connects: affected-row
// counts report matched rows (clientFoundRows=true), which the engine's fenced statements
// rely on; the isolation
// level (see Isolation) is set as the session's default, under the flavour's name for it
// (transaction_isolation on MySQL, tx_isolation on MariaDB), so transactions cost no extra
// statement. Statement arguments are interpolated on the client (interpolateParams=true), one
// round trip per statement instead of a prepare, an execute and a close, unless the DSN sets
// interpolateParams itself.
func Open(ctx context.Context, dsn string, opts ...Option) (*DB, error) {
	o, err := buildOptions("mysql.Open", opts)
	if err != nil {
		return nil, err
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	probe, err := openConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, database, err := Detect(ctx, probe)
	probe.Close()
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	if o.iso != sql.LevelDefault {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[isolationVar(v.Flavour)] = "'" + isolationName(o.iso) + "'"
	}
	// The engine reads RowsAffected as "rows the statement matched" (a lease settlement that
	// matches no row lost its lease); MySQL reports changed rows unless asked for found rows.
	cfg.ClientFoundRows = true
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	pool, err := openConfig(cfg)
	if err != nil && cfg.InterpolateParams && !strings.Contains(dsn, "interpolateParams=") {
		// An unsafe collation (one the driver cannot escape for) rules interpolation out.
		cfg.InterpolateParams = false
		pool, err = openConfig(cfg)
	}
	if err != nil {
		return nil, err
	}
	return newDB(pool, true, v, database, o, nil), nil
}

func openConfig(cfg *gomysql.Config) (*sql.DB, error) {
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return sql.OpenDB(c), nil
}

// New wraps a pool the caller opened (and keeps: Close leaves it open), detecting the server's
// flavour and version through it. The pool's DSN must set clientFoundRows=true (New checks):
// the engine reads affected-row counts as matched rows, and without the flag MySQL counts only
// rows whose values changed. The pool's connections are not set up by settle, so each
// transaction settle begins asks for the isolation level itself (go-sql-driver sends SET
// TRANSACTION ISOLATION LEVEL before START TRANSACTION: one more round trip per claim); Open
// avoids that cost.
func New(ctx context.Context, pool *sql.DB, opts ...Option) (*DB, error) {
	if pool == nil {
		return nil, errors.New("mysql.New: nil *sql.DB")
	}
	o, err := buildOptions("mysql.New", opts)
	if err != nil {
		return nil, err
	}
	v, database, err := Detect(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := checkFoundRows(ctx, pool); err != nil {
		return nil, err
	}
	var txOpts *sql.TxOptions
	if o.iso != sql.LevelDefault {
		txOpts = &sql.TxOptions{Isolation: o.iso}
	}
	return newDB(pool, false, v, database, o, txOpts), nil
}

// checkFoundRows refuses a pool whose connections count changed rows instead of matched ones.
func checkFoundRows(ctx context.Context, pool *sql.DB) error {
	c, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: %w", edgeErr(err))
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "CREATE TEMPORARY TABLE settle_found_rows_probe (x INT)"); err != nil {
		return fmt.Errorf("mysql: probing affected-row counts: %w", edgeErr(err))
	}
	defer c.ExecContext(context.WithoutCancel(ctx), "DROP TEMPORARY TABLE settle_found_rows_probe")
	if _, err := c.ExecContext(ctx, "INSERT INTO settle_found_rows_probe VALUES (1)"); err != nil {
		return fmt.Errorf("mysql: probing affected-row counts: %w", edgeErr(err))
	}
	r, err := c.ExecContext(ctx, "UPDATE settle_found_rows_probe SET x = x")
	if err != nil {
		return fmt.Errorf("mysql: probing affected-row counts: %w", edgeErr(err))
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return errors.New("mysql: the pool counts changed rows, not matched ones: add clientFoundRows=true to its DSN (settle's fenced statements read matched rows)")
	}
	return nil
}

func newDB(pool *sql.DB, owned bool, v Version, database string, o options, txOpts *sql.TxOptions) *DB {
	db := &DB{pool: pool, owned: owned, version: v, database: database, iso: o.iso, txOpts: txOpts, log: o.log, clock: o.clock}
	db.dialect = newDialect(v, o.log)
	db.q = &queueDB{db: db}
	return db
}

func isolationVar(f Flavour) string {
	if f == MariaDB {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

func isolationName(l sql.IsolationLevel) string {
	switch l {
	case sql.LevelReadCommitted:
		return "READ-COMMITTED"
	case sql.LevelSerializable:
		return "SERIALIZABLE"
	}
	return "REPEATABLE-READ"
}

// Version is the server's flavour and version, as detected when the DB was opened.
func (db *DB) Version() Version { return db.version }

// Database is the name of the database the DB's connections use (SELECT DATABASE()).
func (db *DB) Database() string { return db.database }

// Pool returns the *sql.DB underneath, e.g. to size the pool (SetMaxOpenConns) or to run the
// service's own statements.
func (db *DB) Pool() *sql.DB { return db.pool }

// Queue returns the DB as the engine's connection surface (sqlqueue.DB), for custom engines,
// outboxes and tests that use the engine's constructors directly.
func (db *DB) Queue() sqlqueue.DB { return db.q }

// Close closes the pool if Open created it; a pool given to New stays open.
func (db *DB) Close() error {
	if db.owned {
		return db.pool.Close()
	}
	return nil
}

// queueDB is the engine's view of a DB (sqlqueue.DB).
type queueDB struct{ db *DB }

var _ sqlqueue.DB = (*queueDB)(nil)

// Exec runs a statement on some connection of the pool.
func (q *queueDB) Exec(ctx context.Context, s string, args ...any) (sqlqueue.Result, error) {
	return result(q.db.pool.ExecContext(ctx, s, idArgs(s, args)...))
}

// Query runs a query on some connection of the pool.
func (q *queueDB) Query(ctx context.Context, s string, args ...any) (sqlqueue.Rows, error) {
	return rowsOf(q.db.pool.QueryContext(ctx, s, args...))
}

// Begin starts a transaction at the DB's isolation level; Unwrap on it returns the *sql.Tx.
func (q *queueDB) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	tx, err := q.db.pool.BeginTx(ctx, q.db.txOpts)
	if err != nil {
		return nil, edgeErr(err)
	}
	return &txn{tx: tx, begin: q.db.beginSQL, perStatement: q.db.version.Flavour == MariaDB}, nil
}

func (db *DB) beginSQL(ctx context.Context) (*sql.Tx, error) { return db.pool.BeginTx(ctx, db.txOpts) }

// Conn reserves one connection of the pool (advisory locks live on it).
func (q *queueDB) Conn(ctx context.Context) (driver.Conn, error) {
	c, err := q.db.pool.Conn(ctx)
	if err != nil {
		return nil, edgeErr(err)
	}
	return &conn{c: c, txOpts: q.db.txOpts}, nil
}

// txn is a transaction: the engine's, or a caller's (InTx, without begin). Statements reach the
// server as they are given: the engine's own statements carry their hints from rendering
// (ByIDHints), and a handler's SQL through the delivery's transaction is never changed.
//
// Until its first query, a transaction keeps the statements it ran and the rows each one
// matched, so that a claim which InnoDB rolls back as a deadlock victim can run again in a fresh
// transaction after the same statements (the engine settles finished deliveries and then
// claims, in one transaction). A replayed statement that matches a different number of rows
// than the first time means the rows moved on; the replay is then abandoned and the claim's
// error returned.
//
// On MariaDB, the engine's transactions bound their row-lock waits without a statement of their
// own: the lock timeout the engine sets at the start of a transaction (LockTimeout) is not sent
// but carried by each later statement of the transaction (SET STATEMENT … FOR, see
// boundStatement), which saves a round trip per transaction (a lease cycle is five of them).
type txn struct {
	tx     *sql.Tx
	begin  func(ctx context.Context) (*sql.Tx, error) // begins a replacement (restart); nil: none
	log    []loggedExec
	reads  bool // a query has run: what came before it can no longer be replayed
	broken bool // a statement failed
	// perStatement: the engine's transaction on MariaDB, which may carry the lock timeout on
	// each statement; bound is then the "SET STATEMENT … FOR " that does, once the engine has
	// set the lock timeout, and boundSet that statement of the engine's, not sent.
	perStatement bool
	bound        string
	boundSet     string
}

type loggedExec struct {
	sql     string
	args    []any
	matched int64
}

// errReplay is returned by restart when a replayed statement matched other rows.
var errReplay = errors.New("mysql: replaying the transaction's statements matched other rows")

// execSeen, when set (by tests only), is called with every statement a transaction runs.
var execSeen atomic.Pointer[func(query string)]

func (t *txn) Exec(ctx context.Context, q string, args ...any) (sqlqueue.Result, error) {
	if f := execSeen.Load(); f != nil {
		(*f)(q)
	}
	if t.perStatement && len(args) == 0 {
		if n, ok := lockTimeoutOf(q); ok {
			t.bound, t.boundSet = "SET STATEMENT innodb_lock_wait_timeout="+n+" FOR ", q
			return sqlqueue.Result{}, nil
		}
	}
	q, err := t.boundStatement(ctx, q)
	if err != nil {
		return sqlqueue.Result{}, err
	}
	args = idArgs(q, args)
	r, err := result(t.tx.ExecContext(ctx, q, args...))
	switch {
	case err != nil:
		t.broken = true
	case !t.reads && t.begin != nil:
		t.log = append(t.log, loggedExec{sql: q, args: slices.Clone(args), matched: r.RowsAffected})
	}
	return r, err
}

func (t *txn) Query(ctx context.Context, q string, args ...any) (sqlqueue.Rows, error) {
	t.reads = true
	q, err := t.boundStatement(ctx, q)
	if err != nil {
		return nil, err
	}
	return rowsOf(t.tx.QueryContext(ctx, q, args...))
}

// lockTimeoutPrefix starts the statement LockTimeout returns.
const lockTimeoutPrefix = "SET SESSION innodb_lock_wait_timeout = "

// lockTimeoutOf returns the seconds of q when q is exactly a statement LockTimeout returns.
func lockTimeoutOf(q string) (string, bool) {
	n, ok := strings.CutPrefix(q, lockTimeoutPrefix)
	if !ok || n == "" || len(n) > 10 {
		return "", false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return n, true
}

// boundStatement returns q as it is to be sent in a transaction whose lock timeout is carried
// per statement: prefixed with SET STATEMENT innodb_lock_wait_timeout=n FOR, which bounds that
// statement's row-lock waits as the session's setting would and leaves the session's value as
// it was. A statement that may not take the prefix (anything but a plain SELECT, INSERT,
// REPLACE, UPDATE or DELETE: a custom event's CALL, a statement opening with a comment) sets
// the session's lock timeout first, as the engine asked, and the rest of the transaction runs
// as it is given.
func (t *txn) boundStatement(ctx context.Context, q string) (string, error) {
	if t.bound == "" {
		return q, nil
	}
	if prefixable(q) {
		return t.bound + q, nil
	}
	set := t.boundSet
	t.bound, t.boundSet = "", ""
	r, err := result(t.tx.ExecContext(ctx, set))
	if err != nil {
		t.broken = true
		return q, err
	}
	if !t.reads && t.begin != nil {
		t.log = append(t.log, loggedExec{sql: set, matched: r.RowsAffected})
	}
	return q, nil
}

// prefixable reports whether q starts with a keyword SET STATEMENT … FOR takes: SELECT,
// INSERT, REPLACE, UPDATE or DELETE, followed by a space.
func prefixable(q string) bool {
	for _, kw := range [...]string{"SELECT ", "INSERT ", "REPLACE ", "UPDATE ", "DELETE "} {
		if len(q) >= len(kw) && strings.EqualFold(q[:len(kw)], kw) {
			return true
		}
	}
	return false
}

// replayable reports whether restart could rebuild the transaction as it stands.
func (t *txn) replayable() bool { return t.begin != nil && !t.reads && !t.broken }

// restart rolls the transaction back, begins it again in place and runs again the statements
// that preceded the claim (the first n of the log), checking that each matches the rows it
// matched the first time.
func (t *txn) restart(ctx context.Context, n int) error {
	_ = t.tx.Rollback()
	tx, err := t.begin(ctx)
	if err != nil {
		t.broken = true
		return edgeErr(err)
	}
	t.tx, t.reads, t.log = tx, false, t.log[:n]
	for _, e := range t.log {
		r, err := tx.ExecContext(ctx, e.sql, e.args...)
		if err != nil {
			t.broken = true
			return edgeErr(err)
		}
		if m, _ := r.RowsAffected(); m != e.matched {
			t.broken = true
			return errReplay
		}
	}
	return nil
}

func (t *txn) Commit(context.Context) error   { return edgeErr(t.tx.Commit()) }
func (t *txn) Rollback(context.Context) error { return edgeErr(t.tx.Rollback()) }
func (t *txn) Unwrap() any                    { return t.tx }

type conn struct {
	c      *sql.Conn
	txOpts *sql.TxOptions
}

func (c *conn) Exec(ctx context.Context, q string, args ...any) (sqlqueue.Result, error) {
	return result(c.c.ExecContext(ctx, q, idArgs(q, args)...))
}

func (c *conn) Query(ctx context.Context, q string, args ...any) (sqlqueue.Rows, error) {
	return rowsOf(c.c.QueryContext(ctx, q, args...))
}

func (c *conn) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	tx, err := c.c.BeginTx(ctx, c.txOpts)
	if err != nil {
		return nil, edgeErr(err)
	}
	return &txn{tx: tx, begin: func(ctx context.Context) (*sql.Tx, error) { return c.c.BeginTx(ctx, c.txOpts) }}, nil
}

func (c *conn) Close() error { return c.c.Close() }

// Discard closes the connection for good: database/sql drops a connection whose Raw callback
// reports sqldriver.ErrBadConn instead of pooling it, and the server ends the session with every
// lock it held.
func (c *conn) Discard() error {
	_ = c.c.Raw(func(any) error { return sqldriver.ErrBadConn })
	if err := c.c.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err // Raw could not run; a connection Raw dropped is already closed
	}
	return nil
}

// Unwrap returns the *sql.Conn.
func (c *conn) Unwrap() any { return c.c }

func rowsOf(r *sql.Rows, err error) (sqlqueue.Rows, error) {
	if err != nil {
		return nil, edgeErr(err)
	}
	return rows{r}, nil
}

// rows translates the errors of reading a result set (a connection lost while rows arrive).
type rows struct{ *sql.Rows }

func (r rows) Scan(dest ...any) error { return edgeErr(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return edgeErr(r.Rows.Err()) }
func (r rows) Close() error           { return edgeErr(r.Rows.Close()) }

func result(r sql.Result, err error) (sqlqueue.Result, error) {
	if err != nil {
		return sqlqueue.Result{}, edgeErr(err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return sqlqueue.Result{}, edgeErr(err)
	}
	id, _ := r.LastInsertId()
	return sqlqueue.Result{RowsAffected: n, LastInsertID: id}, nil
}
