package sqlite

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

// writer serialises the engine's writes to one database file within the process. SQLite has
// one writer at a time; without this, a claim and a grouped settlement that collide wait in
// SQLite's busy handler, which sleeps for milliseconds at a time, far longer than either
// statement takes. Goroutines of one process instead queue on a channel and hand the write
// lock over at once. A writer that waits longer than the busy timeout goes ahead anyway and
// meets SQLite's own locking (and its busy error), so a write made from inside a held
// transaction fails as it would without settle instead of hanging.
type writer struct {
	sem  chan struct{}
	busy time.Duration
	log  *slog.Logger
}

func newWriter(busy time.Duration, log *slog.Logger) *writer {
	return &writer{sem: make(chan struct{}, 1), busy: busy, log: log}
}

// acquire takes the write turn; it reports whether it got it (false after the busy timeout).
func (w *writer) acquire(ctx context.Context) (bool, error) {
	select {
	case w.sem <- struct{}{}:
		return true, nil
	default:
	}
	t := time.NewTimer(w.busy)
	defer t.Stop()
	select {
	case w.sem <- struct{}{}:
		return true, nil
	case <-t.C:
		w.log.Warn("sqlite: a write waited longer than the busy timeout for its turn; going ahead without it", "busy_timeout", w.busy)
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (w *writer) release(held bool) {
	if held {
		<-w.sem
	}
}

// quiet drops ctx's cancellation for a statement: go-sqlite3 runs every statement under a
// cancellable context in a goroutine of its own (so that it can interrupt it), which costs more
// than the statement. SQLite statements here are short and their waits are bounded by the busy
// timeout; the writer's turn, which is where a claim may wait long, still honours ctx.
func quiet(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// writes reports whether a statement run through Query writes (INSERT … RETURNING and the like).
func writes(sql string) bool {
	s := strings.TrimLeft(sql, " \t\r\n(")
	if len(s) < 6 {
		return false
	}
	switch strings.ToUpper(s[:6]) {
	case "INSERT", "UPDATE", "DELETE", "REPLAC":
		return true
	}
	return false
}

// lockedDB is a sqlqueue.DB whose transactions and writing statements take the writer's turn.
type lockedDB struct {
	db   sqlqueue.DB
	w    *writer
	keys *sqlqueue.LocalKeys // advisory keys a discarded connection held go with it
}

func (l *lockedDB) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	held, err := l.w.acquire(ctx)
	if err != nil {
		return sqlqueue.Result{}, err
	}
	defer l.w.release(held)
	return l.db.Exec(quiet(ctx), sql, args...)
}

func (l *lockedDB) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return lockedQuery(ctx, l.w, l.db, sql, args)
}

func lockedQuery(ctx context.Context, w *writer, q sqlqueue.Queryer, sql string, args []any) (sqlqueue.Rows, error) {
	if !writes(sql) {
		return q.Query(quiet(ctx), sql, args...)
	}
	held, err := w.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(quiet(ctx), sql, args...)
	if err != nil {
		w.release(held)
		return nil, err
	}
	return &lockedRows{Rows: rows, w: w, held: held}, nil
}

func (l *lockedDB) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	return lockedBegin(ctx, l.w, l.db.Begin)
}

func lockedBegin(ctx context.Context, w *writer, begin func(context.Context) (sqlqueue.Transaction, error)) (sqlqueue.Transaction, error) {
	held, err := w.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := begin(quiet(ctx))
	if err != nil {
		w.release(held)
		return nil, err
	}
	return &lockedTx{Transaction: tx, w: w, held: held}, nil
}

func (l *lockedDB) Conn(ctx context.Context) (sqlqueue.Conn, error) {
	c, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &lockedConn{Conn: c, w: l.w, keys: l.keys}, nil
}

type lockedTx struct {
	sqlqueue.Transaction
	w    *writer
	held bool
	once sync.Once
}

func (t *lockedTx) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	return t.Transaction.Exec(quiet(ctx), sql, args...)
}

func (t *lockedTx) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return t.Transaction.Query(quiet(ctx), sql, args...)
}

func (t *lockedTx) Commit(ctx context.Context) error {
	defer t.done()
	return t.Transaction.Commit(ctx)
}

func (t *lockedTx) Rollback(ctx context.Context) error {
	defer t.done()
	return t.Transaction.Rollback(ctx)
}

func (t *lockedTx) done() { t.once.Do(func() { t.w.release(t.held) }) }

type lockedRows struct {
	sqlqueue.Rows
	w    *writer
	held bool
	once sync.Once
}

func (r *lockedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(func() { r.w.release(r.held) })
	return err
}

type lockedConn struct {
	sqlqueue.Conn
	w    *writer
	keys *sqlqueue.LocalKeys
}

// Discard closes the connection for good and releases the advisory keys it held, as a
// server's session takes its advisory locks with it.
func (c *lockedConn) Discard() error {
	c.keys.ReleaseConn(c)
	return c.Conn.Discard()
}

func (c *lockedConn) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	held, err := c.w.acquire(ctx)
	if err != nil {
		return sqlqueue.Result{}, err
	}
	defer c.w.release(held)
	return c.Conn.Exec(quiet(ctx), sql, args...)
}

func (c *lockedConn) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return lockedQuery(ctx, c.w, c.Conn, sql, args)
}

func (c *lockedConn) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	return lockedBegin(ctx, c.w, c.Conn.Begin)
}
