package driver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
)

// StdDB adapts a database/sql pool to DB, for dialects whose driver is a database/sql driver
// (SQLite, MySQL). Transactions it begins are *sql.Tx underneath (Transaction.Unwrap).
func StdDB(db *sql.DB) DB { return &stdDB{db: db} }

// StdTx adapts a caller's *sql.Tx to Transaction, e.g. to publish inside it.
func StdTx(tx *sql.Tx) Transaction { return &stdTx{tx: tx} }

type stdDB struct{ db *sql.DB }

func (s *stdDB) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	return stdResult(s.db.ExecContext(ctx, q, args...))
}

func (s *stdDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return s.db.QueryContext(ctx, q, args...)
}

func (s *stdDB) Begin(ctx context.Context) (Transaction, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &stdTx{tx: tx}, nil
}

func (s *stdDB) Conn(ctx context.Context) (Conn, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &stdConn{c: c}, nil
}

type stdTx struct{ tx *sql.Tx }

func (t *stdTx) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	return stdResult(t.tx.ExecContext(ctx, q, args...))
}

func (t *stdTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *stdTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t *stdTx) Rollback(context.Context) error { return t.tx.Rollback() }
func (t *stdTx) Unwrap() any                    { return t.tx }

type stdConn struct{ c *sql.Conn }

func (c *stdConn) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	return stdResult(c.c.ExecContext(ctx, q, args...))
}

func (c *stdConn) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return c.c.QueryContext(ctx, q, args...)
}

func (c *stdConn) Begin(ctx context.Context) (Transaction, error) {
	tx, err := c.c.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &stdTx{tx: tx}, nil
}

func (c *stdConn) Close() error { return c.c.Close() }

// Discard makes database/sql drop the connection instead of pooling it. Raw returning
// driver.ErrBadConn already closes the *sql.Conn, so Close only has something to do (and an
// error to report) when Raw could not run.
func (c *stdConn) Discard() error {
	_ = c.c.Raw(func(any) error { return driver.ErrBadConn })
	if err := c.c.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

// Unwrap returns the *sql.Conn.
func (c *stdConn) Unwrap() any { return c.c }

func stdResult(r sql.Result, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return Result{}, err
	}
	id, _ := r.LastInsertId()
	return Result{RowsAffected: n, LastInsertID: id}, nil
}
