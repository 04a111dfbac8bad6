package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// This file adapts pgx's native types to the engine's connection surface
// (sqlqueue.DB, Conn, Transaction, Rows). Statements travel over pgx's extended protocol, so
// each rendered statement is prepared once per connection and cached by pgx.

// pgxQueryer is what pgxpool.Pool, pgxpool.Conn and pgx.Tx have in common.
type pgxQueryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// closedFunc reports whether the connection a statement ran on is closed now; nil for the
// pool, whose connection is gone by the time the error is seen.
type closedFunc func() bool

func execOn(ctx context.Context, q pgxQueryer, closed closedFunc, sql string, args []any) (sqlqueue.Result, error) {
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return sqlqueue.Result{}, edgeErr(err, closed)
	}
	return sqlqueue.Result{RowsAffected: tag.RowsAffected()}, nil
}

func queryOn(ctx context.Context, q pgxQueryer, closed closedFunc, sql string, args []any) (sqlqueue.Rows, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, edgeErr(err, closed)
	}
	return &pgRows{rows: rows, closed: closed}, nil
}

var _ driver.Pipeliner = (*poolDB)(nil)

// poolDB is sqlqueue.DB over a pgxpool.Pool, and a driver.Pipeliner.
type poolDB struct {
	pool *pgxpool.Pool
}

func (p *poolDB) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	return execOn(ctx, p.pool, nil, sql, args)
}

func (p *poolDB) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return queryOn(ctx, p.pool, nil, sql, args)
}

func (p *poolDB) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, edgeErr(err, nil)
	}
	return &pgTx{tx: tx}, nil
}

func (p *poolDB) Conn(ctx context.Context) (driver.Conn, error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, edgeErr(err, nil)
	}
	return &pgConn{c: c}, nil
}

// Pipeline sends steps as one pgx batch: one round trip, run by the server in one implicit
// transaction that commits only if every statement succeeds. A step with Want is wrapped so
// that another row count divides by zero on the server, which rolls the batch back:
//
//	WITH settle_step AS (<statement> RETURNING 1) SELECT 1 / (count(*) = <want>)::int FROM settle_step
func (p *poolDB) Pipeline(ctx context.Context, steps []driver.Step) error {
	var b pgx.Batch
	for _, s := range steps {
		queueStep(&b, s)
	}
	br := p.pool.SendBatch(ctx, &b)
	var err error
	for _, s := range steps {
		if err = readStep(br, s); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return stepErr(err, nil)
}

// queueStep queues s on b, wrapped to check its row count on the server when it has a Want.
func queueStep(b *pgx.Batch, s driver.Step) {
	sql := s.SQL
	if s.Want > 0 {
		sql = "WITH settle_step AS (" + sql + " RETURNING 1) SELECT 1 / (count(*) = " +
			strconv.FormatInt(s.Want, 10) + ")::int FROM settle_step"
	}
	b.Queue(sql, s.Args...)
}

// readStep reads the result of s, queued by queueStep, from br.
func readStep(br pgx.BatchResults, s driver.Step) error {
	switch {
	case s.Want > 0:
		var one int32
		return br.QueryRow().Scan(&one)
	case s.Rows != nil:
		rows, err := br.Query()
		if err == nil {
			err = s.Rows(&pgRows{rows: rows})
		}
		return err
	}
	_, err := br.Exec()
	return err
}

// stepErr translates the error of a batch of steps: a step's failed row count check is
// ErrRowCount.
func stepErr(err error, closed closedFunc) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeDivisionByZero {
		return fmt.Errorf("%w (%s)", driver.ErrRowCount, pe.Message)
	}
	return edgeErr(err, closed)
}

// pgTx is sqlqueue.Transaction over a pgx.Tx; Unwrap returns the pgx.Tx.
type pgTx struct{ tx pgx.Tx }

// WrapTx adapts a caller's pgx.Tx to sqlqueue.Transaction, e.g. to publish inside it.
func WrapTx(tx pgx.Tx) sqlqueue.Transaction { return &pgTx{tx: tx} }

func (t *pgTx) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	return execOn(ctx, t.tx, t.closed, sql, args)
}

func (t *pgTx) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return queryOn(ctx, t.tx, t.closed, sql, args)
}

// Commit and Rollback translate errors without asking the connection: pgxpool has taken it
// back by the time they return.
func (t *pgTx) Commit(ctx context.Context) error   { return edgeErr(t.tx.Commit(ctx), nil) }
func (t *pgTx) Rollback(ctx context.Context) error { return edgeErr(t.tx.Rollback(ctx), nil) }
func (t *pgTx) Unwrap() any                        { return t.tx }

func (t *pgTx) closed() bool { return t.tx.Conn().IsClosed() }

// pgConn is driver.Conn over one connection acquired from the pool.
type pgConn struct{ c *pgxpool.Conn }

func (c *pgConn) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	return execOn(ctx, c.c, c.closed, sql, args)
}

func (c *pgConn) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	return queryOn(ctx, c.c, c.closed, sql, args)
}

func (c *pgConn) Begin(ctx context.Context) (sqlqueue.Transaction, error) {
	tx, err := c.c.Begin(ctx)
	if err != nil {
		return nil, edgeErr(err, c.closed)
	}
	return &pgTx{tx: tx}, nil
}

// Close gives the connection back to the pool. pgxpool itself destroys a connection that is
// closed or busy, so a broken connection never returns.
func (c *pgConn) Close() error {
	c.c.Release()
	return nil
}

// Discard takes the connection out of the pool and closes it: the session's advisory locks
// go with it.
func (c *pgConn) Discard() error {
	conn := c.c.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
	defer cancel()
	return edgeErr(conn.Close(ctx), nil)
}

func (c *pgConn) closed() bool { return c.c.Conn().IsClosed() }

// Unwrap returns the *pgxpool.Conn.
func (c *pgConn) Unwrap() any { return c.c }

// pgRows is sqlqueue.Rows over pgx.Rows.
type pgRows struct {
	rows   pgx.Rows
	closed closedFunc
	// A driver.TimeDest reading a timestamp or timestamptz column is scanned through a
	// pgTime of times, in a copy of the destinations (dest), both kept from row to row.
	times []pgTime
	dest  []any
}

func (r *pgRows) Next() bool { return r.rows.Next() }

func (r *pgRows) Scan(dest ...any) error {
	swapped := false
	for i, d := range dest {
		td, ok := d.(driver.TimeDest)
		if !ok || !r.timestampAt(i) {
			continue
		}
		if !swapped {
			r.dest = append(r.dest[:0], dest...)
			if len(r.times) < len(dest) {
				r.times = make([]pgTime, len(dest))
			}
			swapped = true
		}
		r.times[i].dst = td
		r.dest[i] = &r.times[i]
	}
	if swapped {
		dest = r.dest
	}
	return edgeErr(r.rows.Scan(dest...), r.closed)
}

// timestampAt reports whether column i is a timestamp or timestamptz.
func (r *pgRows) timestampAt(i int) bool {
	fds := r.rows.FieldDescriptions()
	return i < len(fds) && (fds[i].DataTypeOID == pgtype.TimestamptzOID || fds[i].DataTypeOID == pgtype.TimestampOID)
}

// pgTime hands a timestamp pgx decoded to a driver.TimeDest, where a database/sql Scanner
// would take it boxed in an interface (one allocation a row).
type pgTime struct{ dst driver.TimeDest }

func (t *pgTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	return t.set(v.Time, v.Valid, v.InfinityModifier)
}

func (t *pgTime) ScanTimestamp(v pgtype.Timestamp) error {
	return t.set(v.Time, v.Valid, v.InfinityModifier)
}

func (t *pgTime) set(v time.Time, valid bool, inf pgtype.InfinityModifier) error {
	switch {
	case !valid:
		t.dst.SetTime(time.Time{})
	case inf != pgtype.Finite:
		return t.dst.Scan(inf.String()) // as pgx hands it to a Scanner: "infinity", "-infinity"
	default:
		t.dst.SetTime(v)
	}
	return nil
}

func (r *pgRows) Err() error { return edgeErr(r.rows.Err(), r.closed) }

func (r *pgRows) Close() error {
	r.rows.Close()
	return r.Err()
}
