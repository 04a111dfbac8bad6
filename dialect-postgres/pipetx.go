package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

var _ driver.TxPipeliner = (*poolDB)(nil)

// BeginPipelined takes a connection from the pool for a transaction that sends its BEGIN in one
// pgx batch with its first statement, and whose CommitWith sends its last statement and COMMIT
// in another: the row-lock form's claim then costs two round trips (BEGIN and the claim; the
// grouped settlement and COMMIT) instead of four. The server runs the same statements in the
// same transaction as over a pgx.Tx: the batch's statements are in the explicit transaction
// BEGIN opened, and a statement that fails skips what follows it in its batch (COMMIT too).
func (p *poolDB) BeginPipelined(ctx context.Context) (driver.PipelinedTx, error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, edgeErr(err, nil)
	}
	return &pipeTx{c: c}, nil
}

// pipeTx is driver.PipelinedTx over one pool connection. It is not a pgx.Tx (Unwrap returns
// nil): the engine uses it only where no handler sees the transaction.
type pipeTx struct {
	c     *pgxpool.Conn // nil once the transaction ended and the connection went back
	begun bool          // BEGIN has been sent
}

func (t *pipeTx) closed() bool { return t.c.Conn().IsClosed() }

func (t *pipeTx) Unwrap() any { return nil }

// first sends BEGIN and sql in one batch; it reads BEGIN's result.
func (t *pipeTx) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	t.begun = true
	var b pgx.Batch
	b.Queue("begin")
	b.Queue(sql, args...)
	br := t.c.SendBatch(ctx, &b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (sqlqueue.Result, error) {
	if t.c == nil {
		return sqlqueue.Result{}, pgx.ErrTxClosed
	}
	if t.begun {
		return execOn(ctx, t.c, t.closed, sql, args)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return sqlqueue.Result{}, edgeErr(err, t.closed)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sqlqueue.Result{}, edgeErr(err, t.closed)
	}
	return sqlqueue.Result{RowsAffected: tag.RowsAffected()}, nil
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (sqlqueue.Rows, error) {
	if t.c == nil {
		return nil, pgx.ErrTxClosed
	}
	if t.begun {
		return queryOn(ctx, t.c, t.closed, sql, args)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return nil, edgeErr(err, t.closed)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, edgeErr(err, t.closed)
	}
	return &pgRows{rows: &batchRows{Rows: rows, br: br}, closed: t.closed}, nil
}

// Commit sends COMMIT (nothing when no statement ran) and gives the connection back.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.c == nil {
		return pgx.ErrTxClosed
	}
	if !t.begun {
		t.release()
		return nil
	}
	tag, err := t.c.Exec(ctx, "commit")
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback // a statement had failed: the server rolled back
	}
	t.release() // a connection still in a transaction is destroyed, not pooled
	return edgeErr(err, nil)
}

// CommitWith sends s's statement and COMMIT in one batch (BEGIN too, when nothing ran yet). A
// statement that fails, or changes another number of rows than s.Want (the check divides by
// zero on the server), leaves the transaction aborted with COMMIT skipped: it is rolled back.
func (t *pipeTx) CommitWith(ctx context.Context, s driver.Step) error {
	if t.c == nil {
		return pgx.ErrTxClosed
	}
	var b pgx.Batch
	begin := !t.begun
	if begin {
		b.Queue("begin")
		t.begun = true
	}
	queueStep(&b, s)
	b.Queue("commit")
	br := t.c.SendBatch(ctx, &b)
	var err error
	if begin {
		_, err = br.Exec()
	}
	if err == nil {
		err = readStep(br, s)
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	if err == nil {
		t.release()
		return nil
	}
	err = stepErr(err, t.closed)
	if !t.c.Conn().IsClosed() && t.c.Conn().PgConn().TxStatus() != 'I' {
		t.rollback(ctx)
	}
	t.release()
	return err
}

// Rollback sends ROLLBACK (nothing when no statement ran) and gives the connection back.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.c == nil {
		return pgx.ErrTxClosed
	}
	var err error
	if t.begun {
		err = t.rollback(ctx)
	}
	t.release()
	return edgeErr(err, nil)
}

// rollback sends ROLLBACK; a connection on which it fails is closed, as pgx closes a pgx.Tx's:
// its state is unknown, and it must not go back to the pool.
func (t *pipeTx) rollback(ctx context.Context) error {
	_, err := t.c.Exec(ctx, "rollback")
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
		_ = t.c.Conn().Close(cctx)
		cancel()
	}
	return err
}

// release gives the connection back to the pool, which destroys it when it is closed, busy or
// still in a transaction.
func (t *pipeTx) release() {
	t.c.Release()
	t.c = nil
}

// batchRows are the rows of a batch's last statement: closing them (or reading past the last
// row) closes the batch, so that the connection is free for the transaction's next statement.
type batchRows struct {
	pgx.Rows
	br   pgx.BatchResults
	err  error
	done bool
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}
