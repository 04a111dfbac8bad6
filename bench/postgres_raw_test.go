package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The raw loops run the statements the PostgreSQL dialect renders for a standard queue table,
// by hand, with no engine around them: the ceiling settle is measured against.

// pgBenchDDL creates the standard queue table in schema s (the columns settle's default table
// description names; payload as bytea, headers as jsonb).
func pgBenchDDL(s string) string {
	return fmt.Sprintf(`CREATE TABLE %[1]s.q (
	id bigserial PRIMARY KEY,
	payload bytea NOT NULL,
	attempt integer NOT NULL DEFAULT 0,
	retry_after timestamptz,
	locked_until timestamptz,
	headers jsonb,
	created_at timestamptz NOT NULL DEFAULT now()
)`, s)
}

// pgSeed fills schema s's queue table with n small payloads through COPY.
func pgSeed(ctx context.Context, pool *pgxpool.Pool, s string, n int) error {
	payload := []byte(`{"n":1}`)
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{payload}
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{s, "q"}, []string{"payload"}, pgx.CopyFromRows(rows))
	return err
}

// rawLoop is one raw contender: it drains the table with w workers, each claiming b rows at a
// time, and returns how many rows it settled.
type rawLoop func(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error)

// runWorkers runs w copies of step until each one reports that the table is empty or fails.
func runWorkers(ctx context.Context, w int, step func(ctx context.Context) (int, error)) (int64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, w)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := step(ctx)
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
				total.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}

func leaseClaimSQL(s string) string {
	return fmt.Sprintf(`UPDATE %[1]s.q SET locked_until = $1, attempt = attempt + 1
WHERE id IN (SELECT id FROM %[1]s.q
	WHERE (retry_after IS NULL OR retry_after <= $2) AND (locked_until IS NULL OR locked_until <= $2)
	ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
RETURNING id, payload, attempt, headers`, s)
}

type claimedRow struct {
	id      int64
	payload []byte
	attempt int32
	headers []byte
}

func scanClaimed(rows pgx.Rows, dst []claimedRow) ([]claimedRow, error) {
	for rows.Next() {
		var r claimedRow
		if err := rows.Scan(&r.id, &r.payload, &r.attempt, &r.headers); err != nil {
			rows.Close()
			return dst, err
		}
		dst = append(dst, r)
	}
	return dst, rows.Err()
}

// rawLeasePerMessage claims b rows by lease and deletes each with its own fenced statement.
func rawLeasePerMessage(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	claim, del := leaseClaimSQL(s), fmt.Sprintf(`DELETE FROM %s.q WHERE id = $1 AND locked_until = $2`, s)
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		tok := now.Add(30 * time.Second)
		rows, err := pool.Query(ctx, claim, tok, now, b)
		if err != nil {
			return 0, err
		}
		got, err := scanClaimed(rows, nil)
		if err != nil {
			return 0, err
		}
		for _, r := range got {
			ct, err := pool.Exec(ctx, del, r.id, tok)
			if err != nil {
				return 0, err
			}
			if ct.RowsAffected() != 1 {
				return 0, fmt.Errorf("row %d: lease lost", r.id)
			}
		}
		return len(got), nil
	})
}

// rawLeaseBatched claims b rows by lease and deletes them with one fenced statement.
func rawLeaseBatched(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	claim := leaseClaimSQL(s)
	del := fmt.Sprintf(`DELETE FROM %[1]s.q AS q USING unnest($1::bigint[], $2::timestamptz[]) AS s(id, tok)
WHERE q.id = s.id AND q.locked_until = s.tok RETURNING q.id`, s)
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		tok := now.Add(30 * time.Second)
		rows, err := pool.Query(ctx, claim, tok, now, b)
		if err != nil {
			return 0, err
		}
		got, err := scanClaimed(rows, nil)
		if err != nil || len(got) == 0 {
			return 0, err
		}
		ids, toks := make([]int64, len(got)), make([]time.Time, len(got))
		for i, r := range got {
			ids[i], toks[i] = r.id, tok
		}
		ct, err := pool.Exec(ctx, del, ids, toks)
		if err != nil {
			return 0, err
		}
		if int(ct.RowsAffected()) != len(got) {
			return 0, fmt.Errorf("lost %d leases", len(got)-int(ct.RowsAffected()))
		}
		return len(got), nil
	})
}

// rawRowLock claims b rows with FOR UPDATE SKIP LOCKED in a transaction, deletes them in that
// transaction with one DELETE … = ANY($1) (what the row-lock form runs on PostgreSQL) and
// commits.
func rawRowLock(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	del := fmt.Sprintf(`DELETE FROM %s.q WHERE id = ANY($1)`, s)
	return rowLockLoop(ctx, pool, s, "attempt", w, b, func(ctx context.Context, tx pgx.Tx, got []claimedRow) error {
		ids := make([]int64, len(got))
		for i, r := range got {
			ids[i] = r.id
		}
		_, err := tx.Exec(ctx, del, ids)
		return err
	})
}

// rawRowLockPipelined is the row-lock form as the engine runs it on PostgreSQL outside
// transactional mode: the claim's BEGIN sent with its SELECT (created_at too) as one pgx batch
// on the claim's connection, and its DELETE … = ANY($1) with its COMMIT as another: two round
// trips a claim, the statements settle sends.
func rawRowLockPipelined(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	claim := fmt.Sprintf(`SELECT id, payload, attempt + 1, headers, created_at FROM %s.q
WHERE (retry_after IS NULL OR retry_after <= $1) AND locked_until IS NULL ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, s)
	del := fmt.Sprintf(`DELETE FROM %s.q WHERE id = ANY($1)`, s)
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Release()
		var first pgx.Batch
		first.Queue("begin")
		first.Queue(claim, time.Now().UTC(), b)
		br := c.SendBatch(ctx, &first)
		got, err := scanPipelinedClaim(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil || len(got) == 0 {
			_, rerr := c.Exec(ctx, "rollback")
			return 0, errors.Join(err, rerr)
		}
		ids := make([]int64, len(got))
		for i, r := range got {
			ids[i] = r.id
		}
		var last pgx.Batch
		last.Queue(del, ids)
		last.Queue("commit")
		return len(got), c.SendBatch(ctx, &last).Close()
	})
}

// scanPipelinedClaim reads the results of a batch of BEGIN and the claim of rawRowLockPipelined.
func scanPipelinedClaim(br pgx.BatchResults) ([]claimedRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	var got []claimedRow
	for rows.Next() {
		var r claimedRow
		var created time.Time
		if err := rows.Scan(&r.id, &r.payload, &r.attempt, &r.headers, &created); err != nil {
			rows.Close()
			return nil, err
		}
		got = append(got, r)
	}
	return got, rows.Err()
}

// rawRowLockPerRow is the row-lock form as the engine runs it on MySQL and MariaDB: a claim of
// b rows FOR UPDATE SKIP LOCKED, then each row's own DELETE in the claim transaction, then one
// commit.
func rawRowLockPerRow(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	del := fmt.Sprintf(`DELETE FROM %s.q WHERE id = $1`, s)
	return rowLockLoop(ctx, pool, s, "attempt + 1", w, b, func(ctx context.Context, tx pgx.Tx, got []claimedRow) error {
		for _, r := range got {
			if _, err := tx.Exec(ctx, del, r.id); err != nil {
				return err
			}
		}
		return nil
	})
}

// rowLockLoop runs w workers, each claiming b rows (reporting attempt as the expression
// attempt) with FOR UPDATE SKIP LOCKED in a transaction, settling them with settle in it and
// committing, until a claim comes back empty.
func rowLockLoop(ctx context.Context, pool *pgxpool.Pool, s, attempt string, w, b int, settle func(context.Context, pgx.Tx, []claimedRow) error) (int64, error) {
	claim := fmt.Sprintf(`SELECT id, payload, %[2]s, headers FROM %[1]s.q
WHERE (retry_after IS NULL OR retry_after <= $1) ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, s, attempt)
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, claim, time.Now().UTC(), b)
		if err != nil {
			return 0, err
		}
		got, err := scanClaimed(rows, nil)
		if err != nil || len(got) == 0 {
			return 0, err
		}
		if err := settle(ctx, tx, got); err != nil {
			return 0, err
		}
		return len(got), tx.Commit(ctx)
	})
}

// rawLeaseEngine is the lease form as the engine runs it on a database that does not pipeline:
// one transaction per cycle that deletes the previous claim's rows (token-fenced, an IN list)
// and claims the next batch.
func rawLeaseEngine(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	claim := leaseClaimSQL(s)
	return runCycles(ctx, w, func(ctx context.Context, prev []claimedRow, prevTok time.Time) ([]claimedRow, time.Time, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, time.Time{}, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if len(prev) > 0 {
			ct, err := tx.Exec(ctx, fencedDelete(s, prev), fencedArgs(prev, prevTok)...)
			if err != nil {
				return nil, time.Time{}, err
			}
			if int(ct.RowsAffected()) != len(prev) {
				return nil, time.Time{}, fmt.Errorf("lost %d leases", len(prev)-int(ct.RowsAffected()))
			}
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		tok := now.Add(30 * time.Second)
		rows, err := tx.Query(ctx, claim, tok, now, b)
		if err != nil {
			return nil, time.Time{}, err
		}
		got, err := scanClaimed(rows, nil)
		if err != nil {
			return nil, time.Time{}, err
		}
		return got, tok, tx.Commit(ctx)
	})
}

// rawLeasePipelined is the lease form as the engine runs it on PostgreSQL: the statements of
// rawLeaseEngine sent as one pgx batch per cycle (one round trip, the extended protocol's
// implicit transaction), the fenced DELETE wrapped so that a count short of the claim divides
// by zero and rolls the cycle back.
func rawLeasePipelined(ctx context.Context, pool *pgxpool.Pool, s string, w, b int) (int64, error) {
	claim := leaseClaimSQL(s)
	return runCycles(ctx, w, func(ctx context.Context, prev []claimedRow, prevTok time.Time) ([]claimedRow, time.Time, error) {
		var batch pgx.Batch
		if len(prev) > 0 {
			batch.Queue(fmt.Sprintf("WITH done AS (%s RETURNING 1) SELECT 1 / (count(*) = %d)::int FROM done", fencedDelete(s, prev), len(prev)),
				fencedArgs(prev, prevTok)...)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		tok := now.Add(30 * time.Second)
		batch.Queue(claim, tok, now, b)
		br := pool.SendBatch(ctx, &batch)
		var err error
		if len(prev) > 0 {
			var one int
			err = br.QueryRow().Scan(&one)
		}
		var got []claimedRow
		if err == nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				got, err = scanClaimed(rows, nil)
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return got, tok, err
	})
}

// runCycles runs w workers, each settling its previous claim and claiming the next batch with
// cycle, until a claim comes back empty; it returns how many rows were settled.
func runCycles(ctx context.Context, w int, cycle func(ctx context.Context, prev []claimedRow, prevTok time.Time) ([]claimedRow, time.Time, error)) (int64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, w)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev []claimedRow
			var prevTok time.Time
			for {
				got, tok, err := cycle(ctx, prev, prevTok)
				if err != nil {
					errs <- err
					return
				}
				total.Add(int64(len(prev)))
				if len(got) == 0 {
					return
				}
				prev, prevTok = got, tok
			}
		}()
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}

// fencedDelete is the engine's grouped settlement of prev: DELETE … WHERE locked_until = $1
// AND id IN ($2, …).
func fencedDelete(s string, prev []claimedRow) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `DELETE FROM %s.q WHERE locked_until = $1 AND id IN (`, s)
	for i := range prev {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "$%d", i+2)
	}
	sb.WriteString(")")
	return sb.String()
}

func fencedArgs(prev []claimedRow, tok time.Time) []any {
	args := []any{tok}
	for _, r := range prev {
		args = append(args, r.id)
	}
	return args
}
