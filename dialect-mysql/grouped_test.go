package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// groupedTables are the two kinds of queue table a grouped settlement writes: acks delete the
// rows, or they mark processed_at (the UPDATE form).
func groupedTables(name string) []sqlqueue.Table {
	del := sqlqueue.StandardTable(name + "_del")
	del.Columns.Group, del.Columns.ProcessedAt = "", ""
	mark := sqlqueue.StandardTable(name + "_mark")
	mark.Columns.Group = ""
	return []sqlqueue.Table{del, mark}
}

// staleTable creates t, has InnoDB record statistics of it while it is empty and keep them
// (STATS_AUTO_RECALC=0), then bulk-inserts n rows: the optimizer plans every later statement
// believing the table empty, as it does for a queue table filled faster than its statistics
// are recalculated.
func staleTable(t *testing.T, db *DB, tb sqlqueue.Table, n int) {
	t.Helper()
	ctx := context.Background()
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"ALTER TABLE " + quote(tb.Name) + " STATS_AUTO_RECALC = 0",
		"ANALYZE TABLE " + quote(tb.Name),
		fmt.Sprintf("INSERT INTO %s (payload) SELECT '1' FROM seq_1_to_%d", quote(tb.Name), n),
	} {
		if _, err := db.Pool().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var rows int64
	if err := db.Pool().QueryRowContext(ctx, "SELECT n_rows FROM mysql.innodb_table_stats WHERE database_name = DATABASE() AND table_name = ?", tb.Name).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows > int64(n)/10 {
		t.Fatalf("InnoDB's statistics count %d rows of %d: not stale", rows, n)
	}
}

// settleArgs are the arguments of SettleByIDs's statement for ids of tb, as the engine passes
// them: the ids, then the time when tb marks processed_at.
func settleArgs(tb sqlqueue.Table, ids ...int64) []any {
	var args []any
	for _, id := range ids {
		args = append(args, id)
	}
	if tb.Columns.ProcessedAt != "" {
		args = append(args, Epoch())
	}
	return args
}

// arrayArgs are the arguments of SettleByIDArray's statement for ids of tb, as the DB's
// connections pass them on: the JSON text of the ids, then the time when tb marks processed_at.
func arrayArgs(tb sqlqueue.Table, ids ...int64) []any {
	args := []any{ids}
	if tb.Columns.ProcessedAt != "" {
		args = append(args, Epoch())
	}
	return idArgs(idArray, args)
}

func settleArraySQL(t *testing.T, d *dialect, tb sqlqueue.Table) string {
	t.Helper()
	s, err := driver.NewSchema(d, tb)
	if err != nil {
		t.Fatal(err)
	}
	stmt := d.SettleByIDArray(s.QTable, s.ID, s.ProcessedAt)
	if stmt == "" {
		t.Fatal("SettleByIDArray: none on a server with JSON_TABLE")
	}
	return stmt
}

func settleSQL(t *testing.T, db *DB, tb sqlqueue.Table, n int) string {
	t.Helper()
	return settleSQLOf(t, db.dialect, tb, n)
}

func settleSQLOf(t *testing.T, d *dialect, tb sqlqueue.Table, n int) string {
	t.Helper()
	s, err := driver.NewSchema(d, tb)
	if err != nil {
		t.Fatal(err)
	}
	return d.SettleByIDs(s.QTable, s.ID, s.ProcessedAt, n)
}

// TestGroupedSettlementPlan checks that MariaDB plans the grouped settlement as the dialect
// means it to, on a table of 20,000 rows whose statistics say it is empty: the derived table of
// ids first, then one unique lookup of the primary key per id (eq_ref), never a range or a scan
// of the queue table, for both the DELETE and the UPDATE form.
func TestGroupedSettlementPlan(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	for _, tb := range groupedTables("plan") {
		staleTable(t, db, tb, 20000)
		// Every spelling of the ids: one JSON array argument and JSON_ARRAY of one argument
		// each (servers with JSON_TABLE, like this one), and the UNION ALL of older MySQL.
		for _, form := range []string{"array", "json_table", "union"} {
			t.Run(tb.Name+"/"+form, func(t *testing.T) {
				d := *db.dialect
				d.jsonTable = form != "union"
				ids := []int64{3, 4, 7, 150, 151, 9000}
				stmt, args := settleSQLOf(t, &d, tb, len(ids)), settleArgs(tb, ids...)
				if form == "array" {
					stmt, args = settleArraySQL(t, &d, tb), arrayArgs(tb, ids...)
				}
				rows, err := db.Pool().QueryContext(ctx, "EXPLAIN "+stmt, args...)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				cols, _ := rows.Columns()
				var plan []map[string]string
				for rows.Next() {
					vals := make([]sql.NullString, len(cols))
					ptrs := make([]any, len(cols))
					for i := range vals {
						ptrs[i] = &vals[i]
					}
					if err := rows.Scan(ptrs...); err != nil {
						t.Fatal(err)
					}
					row := map[string]string{}
					for i, c := range cols {
						row[c] = vals[i].String
					}
					plan = append(plan, row)
					t.Logf("%s %s type=%s key=%s ref=%s rows=%s", row["select_type"], row["table"], row["type"], row["key"], row["ref"], row["rows"])
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				first := "<derived"
				if d.jsonTable {
					first = "settle_ids"
				}
				if len(plan) < 2 || !strings.HasPrefix(plan[0]["table"], first) ||
					plan[1]["table"] != "settle_q" || plan[1]["type"] != "eq_ref" || plan[1]["key"] != "PRIMARY" {
					t.Fatalf("plan: %v; want the derived table of ids, then settle_q by eq_ref on PRIMARY", plan)
				}
				for _, row := range plan {
					if row["table"] == "settle_q" && row["type"] != "eq_ref" {
						t.Errorf("the queue table is also read by %s", row["type"])
					}
				}
			})
		}
	}
}

// TestGroupedSettlementTakesNoOtherLock holds rows 1 and 2 in one transaction, as a claim does,
// while another transaction holds row 3, and settles 1 and 2 with the grouped statement: it must
// not wait for row 3. (InnoDB's range read of "… WHERE id IN (1, 2)" locks the row after 2 before
// it sees that row is past the range; that is how concurrent claims' IN-list settlements waited
// on each other and deadlocked. The IN-list form's wait is logged, not asserted.)
func TestGroupedSettlementTakesNoOtherLock(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	for _, tb := range groupedTables("nolock") {
		t.Run(tb.Name, func(t *testing.T) {
			staleTable(t, db, tb, 5)
			other, err := db.Pool().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback()
			var id int64
			if err := other.QueryRowContext(ctx, "SELECT id FROM "+quote(tb.Name)+" WHERE id = 3 FOR UPDATE").Scan(&id); err != nil {
				t.Fatal(err)
			}
			try := func(stmt string, args ...any) (time.Duration, int64, error) {
				c, err := db.Pool().Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
					t.Fatal(err)
				}
				defer c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = DEFAULT")
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				rows, err := tx.QueryContext(ctx, "SELECT id FROM "+quote(tb.Name)+" WHERE id IN (1, 2) FOR UPDATE SKIP LOCKED")
				if err != nil {
					t.Fatal(err)
				}
				rows.Close()
				start := time.Now()
				res, err := tx.ExecContext(ctx, stmt, args...)
				took := time.Since(start)
				if err != nil {
					return took, 0, err
				}
				n, _ := res.RowsAffected()
				return took, n, nil
			}
			took, n, err := try(settleSQL(t, db, tb, 2), settleArgs(tb, 1, 2)...)
			if err != nil || n != 2 || took > 500*time.Millisecond {
				t.Errorf("grouped settlement of rows 1 and 2 while row 3 is held: %d rows in %v, %v; want 2 rows at once", n, took, err)
			}
			took, n, err = try(settleArraySQL(t, db.dialect, tb), arrayArgs(tb, 1, 2)...)
			if err != nil || n != 2 || took > 500*time.Millisecond {
				t.Errorf("grouped settlement of rows 1 and 2 as one array while row 3 is held: %d rows in %v, %v; want 2 rows at once", n, took, err)
			}
			inList := "DELETE " + quote(tb.Name) + " FROM " + quote(tb.Name) + " FORCE INDEX (PRIMARY) WHERE id IN (?, ?)"
			args := []any{int64(1), int64(2)}
			if tb.Columns.ProcessedAt != "" {
				inList = "UPDATE " + quote(tb.Name) + " FORCE INDEX (PRIMARY) SET processed_at = ? WHERE id IN (?, ?)"
				args = append([]any{Epoch()}, args...)
			}
			took, n, err = try(inList, args...)
			t.Logf("for comparison, the IN-list form: %d rows in %v, error %v", n, took.Round(time.Millisecond), err)
		})
	}
}

// TestRowLockGroupedDrain drains 20,000 rows freshly bulk-inserted into a table whose
// statistics say it is empty, with four row-lock subscriptions of one worker each (claims of
// up to 100 rows) interleaving their claims: every claim's acks must be settled by one grouped
// statement, never row by row, no settlement may fail (a deadlock or lock wait timeout would
// fail its whole claim), no claim error may be logged, and every row must be acknowledged once.
func TestRowLockGroupedDrain(t *testing.T) {
	s := mariadbServer(t)
	for _, tb := range groupedTables("drain") {
		t.Run(tb.Name, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, s)
			const n = 20000
			staleTable(t, db, tb, n)
			qt := quote(tb.Name)
			var grouped, arrays, perRow atomic.Int64
			seen := func(q string) {
				switch {
				case strings.Contains(q, "`settle_ids` STRAIGHT_JOIN "+qt+" "):
					grouped.Add(1)
					if strings.Contains(q, "JSON_TABLE(?, ") {
						arrays.Add(1) // the ids in one argument (SettleByIDArray)
					}
				case strings.HasPrefix(q, "DELETE FROM "+qt+" WHERE"),
					strings.HasPrefix(q, "UPDATE "+qt+" SET `processed_at`"),
					strings.Contains(q, " IN ("):
					perRow.Add(1)
				}
			}
			execSeen.Store(&seen)
			defer execSeen.Store(nil)

			logs := &coretest.Logs{}
			var mu sync.Mutex
			acked := make(map[string]int, n)
			var failures []error
			all := make(chan struct{})
			app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)), core.WithObserver(func(st core.Settlement) {
				mu.Lock()
				defer mu.Unlock()
				if st.Err != nil {
					failures = append(failures, st.Err)
					return
				}
				acked[st.Delivery.ID()]++
				if len(acked) == n && all != nil {
					close(all)
					all = nil
				}
			}))
			for i := range 4 {
				ep, err := RowLock(db, tb, "")
				if err != nil {
					t.Fatal(err)
				}
				if err := core.Subscribe(app, ep, func(context.Context, *core.Message[int]) error { return nil },
					core.Name(fmt.Sprint("c", i)), sqlqueue.BatchSize(100)); err != nil {
					t.Fatal(err)
				}
			}
			done := all
			before := claimRestarts.Load()
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- app.Run(runCtx) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				mu.Lock()
				t.Errorf("acknowledged %d of %d", len(acked), n)
				mu.Unlock()
			}
			stop()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(failures) > 0 {
				t.Errorf("%d settlements failed, e.g. %v", len(failures), errors.Join(failures[:min(3, len(failures))]...))
			}
			for id, c := range acked {
				if c != 1 {
					t.Errorf("message %s acknowledged %d times", id, c)
				}
			}
			for _, r := range logs.Records(slog.LevelWarn) {
				t.Errorf("logged: %s %v", r.Message, r.Attrs)
			}
			var left int
			q := "SELECT COUNT(*) FROM " + qt
			if tb.Columns.ProcessedAt != "" {
				q += " WHERE processed_at IS NULL"
			}
			if err := db.Pool().QueryRowContext(ctx, q).Scan(&left); err != nil || left != 0 {
				t.Errorf("%d rows left unsettled (%v)", left, err)
			}
			g, p := grouped.Load(), perRow.Load()
			if p != 0 || g == 0 || g > n/50 {
				t.Errorf("settled by %d grouped statements and %d statements naming rows otherwise; want only grouped ones, one per claim (at most %d)", g, p, n/50)
			}
			if a := arrays.Load(); a != g {
				t.Errorf("%d of %d grouped statements had the ids in one argument; want all on a server with JSON_TABLE", a, g)
			}
			t.Logf("%d rows acknowledged once each by %d grouped statements; claims restarted after a deadlock or lock wait timeout: %d",
				len(acked), g, claimRestarts.Load()-before)
		})
	}
}

// TestIDArgs: the ids of SettleByIDArray's statement become the text of a JSON array; the
// arguments of any other statement (a handler's own, through the delivery's transaction) reach
// the driver as they were given, a []int64 included.
func TestIDArgs(t *testing.T) {
	d := &dialect{jsonTable: true}
	stmt := d.SettleByIDArray("`jobs`", "`id`", "`processed_at`")
	at := Epoch()
	got := idArgs(stmt, []any{[]int64{3, 10, -2}, at})
	if len(got) != 2 || got[0] != "[3,10,-2]" || got[1] != at {
		t.Fatalf("idArgs of the array statement: %#v", got)
	}
	own := []any{[]int64{1, 2}}
	if got := idArgs("UPDATE `jobs` SET x = 1 WHERE id = ?", own); len(got) != 1 || !slices.Equal(got[0].([]int64), []int64{1, 2}) {
		t.Fatalf("idArgs changed another statement's arguments: %#v", got)
	}
	if (&dialect{}).SettleByIDArray("`jobs`", "`id`", "") != "" {
		t.Fatal("SettleByIDArray without JSON_TABLE: want none")
	}
}
