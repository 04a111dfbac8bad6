package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/dialect-mysql"
)

// The raw MariaDB loops run, by hand on database/sql and go-sql-driver/mysql, the statements
// dialect-mysql renders for the standard queue table: the ceiling settle is measured against.
// Every loop runs at READ COMMITTED with client-side interpolation, the session settings
// mysql.Open gives settle's own pool.

// myBenchDDL is the standard queue table without a group or processed_at column (ack deletes).
const myBenchDDL = `CREATE TABLE q (
	id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	payload LONGBLOB NOT NULL,
	attempt INT NOT NULL DEFAULT 0,
	retry_after DATETIME(6) NULL,
	locked_until DATETIME(6) NULL,
	headers JSON NULL,
	created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB`

// mySeed fills the queue table with n small payloads, 1000 rows per INSERT.
func mySeed(ctx context.Context, db *sql.DB, n int) error {
	const chunk = 1000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		q := "INSERT INTO q (payload) VALUES " + strings.TrimSuffix(strings.Repeat("('{\"n\":1}'),", k), ",")
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// myRawLoop is one raw contender: it drains q with w workers, each claiming b rows at a time,
// and returns how many rows it settled.
type myRawLoop func(ctx context.Context, db *sql.DB, w, b int) (int64, error)

type myRow struct {
	id      int64
	payload []byte
	attempt int64
	headers []byte
}

func myScan(rows *sql.Rows, dst []myRow) ([]myRow, error) {
	defer rows.Close()
	for rows.Next() {
		var r myRow
		if err := rows.Scan(&r.id, &r.payload, &r.attempt, &r.headers); err != nil {
			return dst, err
		}
		dst = append(dst, r)
	}
	return dst, rows.Err()
}

// myInList is "prefix ?, ?, … suffix" for n placeholders.
func myInList(prefix string, n int, suffix string) string {
	return prefix + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + suffix
}

const (
	myRowLockClaim = "SELECT `id`, `payload`, `attempt` + 1, `headers` FROM `q` WHERE (`retry_after` IS NULL OR `retry_after` <= ?) ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED"
	myLeaseSelect  = "SELECT `id`, `payload`, `attempt` + 1, `headers` FROM `q` WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED"
)

// myRowLockStep is one claim of the row-lock loops: it claims b rows with FOR UPDATE SKIP
// LOCKED in a transaction, settles them with settle inside it and commits.
func myRowLockStep(ctx context.Context, db *sql.DB, b int, settle func(*sql.Tx, []myRow) error) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now().UTC().Truncate(time.Microsecond)
	rows, err := tx.QueryContext(ctx, myRowLockClaim, now, b)
	if err != nil {
		return 0, err
	}
	got, err := myScan(rows, make([]myRow, 0, b))
	if err != nil || len(got) == 0 {
		return 0, err
	}
	if err := settle(tx, got); err != nil {
		return 0, err
	}
	return len(got), tx.Commit()
}

// myRawRowLock claims b rows and deletes each in the claim transaction (the engine's per-row
// finishing statement), whose one commit settles them all.
func myRawRowLock(ctx context.Context, db *sql.DB, w, b int) (int64, error) {
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		return myRowLockStep(ctx, db, b, func(tx *sql.Tx, got []myRow) error {
			for _, r := range got {
				if _, err := tx.ExecContext(ctx, "DELETE FROM `q` WHERE `id` = ?", r.id); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// myRawRowLockGrouped claims b rows and deletes them all with one DELETE … WHERE id IN (…) by
// the primary key in the claim transaction, as the engine settles a claim's acks on a
// GroupedRowLock dialect (dialect-mysql spells that statement as a join of the ids to the table
// by primary key instead, which locks no row past the claim's: see docs/tuning.md). A claim that MariaDB
// picks as a deadlock victim has lost its transaction and its locks: its rows go back to the
// queue and the step runs again.
func myRawRowLockGrouped(ctx context.Context, db *sql.DB, w, b int) (int64, error) {
	grouped := func(tx *sql.Tx, got []myRow) error {
		args := make([]any, len(got))
		for i, r := range got {
			args[i] = r.id
		}
		_, err := tx.ExecContext(ctx, myInList("DELETE `q` FROM `q` FORCE INDEX (PRIMARY) WHERE `id` IN (", len(got), ")"), args...)
		return err
	}
	return runWorkers(ctx, w, func(ctx context.Context) (int, error) {
		n, err := myRowLockStep(ctx, db, b, grouped)
		for tries := 0; err != nil && mysql.IsTransient(err) && tries < 50; tries++ {
			n, err = myRowLockStep(ctx, db, b, grouped)
		}
		return n, err
	})
}

// myRawLease runs the lease form as the engine does with one worker per claimant: each
// transaction first settles the previous batch with one token-fenced DELETE, then claims the
// next batch (select SKIP LOCKED, stamp the token and attempt + 1) and commits; a last
// transaction settles the final batch. Both IN-list statements read by the primary key (FORCE
// INDEX), as dialect-mysql sends them: with a queue table's stale statistics the optimizer
// would otherwise scan, and scanning deletes lock every row they read. A step that MariaDB
// picks as a deadlock victim (two claims' SKIP LOCKED scans can wait on each other's freshly
// deleted rows) runs again, as the engine's would.
func myRawLease(ctx context.Context, db *sql.DB, w, b int) (int64, error) {
	type batch struct {
		tok time.Time
		ids []any
	}
	settle := func(ctx context.Context, tx *sql.Tx, prev *batch) error {
		if prev == nil || len(prev.ids) == 0 {
			return nil
		}
		args := append([]any{prev.tok}, prev.ids...)
		res, err := tx.ExecContext(ctx, myInList("DELETE `q` FROM `q` FORCE INDEX (PRIMARY) WHERE `locked_until` = ? AND `id` IN (", len(prev.ids), ")"), args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != int64(len(prev.ids)) {
			return fmt.Errorf("fenced delete matched %d of %d rows: lease lost", n, len(prev.ids))
		}
		return nil
	}
	// step settles prev and claims the next batch in one transaction.
	step := func(ctx context.Context, prev *batch) (*batch, int, error) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		next := &batch{tok: now.Add(30 * time.Second)}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return next, 0, err
		}
		defer tx.Rollback()
		if err := settle(ctx, tx, prev); err != nil {
			return next, 0, err
		}
		settled := 0
		if prev != nil {
			settled = len(prev.ids)
		}
		rows, err := tx.QueryContext(ctx, myLeaseSelect, now, now, b)
		if err != nil {
			return next, 0, err
		}
		got, err := myScan(rows, make([]myRow, 0, b))
		if err != nil {
			return next, 0, err
		}
		for _, r := range got {
			next.ids = append(next.ids, r.id)
		}
		if len(got) > 0 {
			args := append([]any{next.tok}, next.ids...)
			if _, err := tx.ExecContext(ctx, myInList("UPDATE `q` FORCE INDEX (PRIMARY) SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (", len(got), ")"), args...); err != nil {
				return next, 0, err
			}
		}
		return next, settled, tx.Commit()
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, w)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev *batch
			for {
				next, settled, err := step(ctx, prev)
				for tries := 0; err != nil && mysql.IsTransient(err) && tries < 5; tries++ {
					// A deadlock rolled the whole transaction back: the previous batch still
					// holds its token, so settling and claiming again is the same step.
					next, settled, err = step(ctx, prev)
				}
				if err != nil {
					errs <- err
					return
				}
				total.Add(int64(settled))
				if len(next.ids) == 0 {
					return
				}
				prev = next
			}
		}()
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}
