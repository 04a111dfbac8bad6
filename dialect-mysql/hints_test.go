package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

func TestByIDHintShapes(t *testing.T) {
	d := newDialect(Version{Flavour: MariaDB}, nil)
	if got, want := d.UpdateByIDs("`s`.`jobs`"), "UPDATE `s`.`jobs` FORCE INDEX (PRIMARY)"; got != want {
		t.Errorf("UpdateByIDs = %s; want %s", got, want)
	}
	if got, want := d.DeleteByIDs("`jobs`"), "DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY)"; got != want {
		t.Errorf("DeleteByIDs = %s; want %s", got, want)
	}
	// The advisory candidates' filter is the dialect's KeyFree.
	want := "IS_USED_LOCK(" + lockNameSQL("jobs:", "CAST(`id` AS CHAR)") + ") IS NULL"
	if got := d.KeyFree("jobs:", "CAST(`id` AS CHAR)"); got != want {
		t.Errorf("KeyFree\n got %s\nwant %s", got, want)
	}
}

// TestHandlerSQLReachesServerUnchanged: a transactional handler deletes rows of its own queue
// table by an IN list with LIMIT 1 through the delivery's transaction. The statement must reach
// the server as written: spelled in the multi-table form that the engine's grouped DELETE uses,
// MariaDB and MySQL refuse it (a multi-table DELETE takes no LIMIT). Until the engine's hints
// moved to rendering, a text rewrite at the module edge changed it and the handler failed.
func TestHandlerSQLReachesServerUnchanged(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO jobs (payload, grp) VALUES ('\"go\"', 'work'), ('\"x\"', 'other'), ('\"y\"', 'other')"); err != nil {
		t.Fatal(err)
	}
	var others []any
	rows, err := db.Pool().QueryContext(ctx, "SELECT id FROM jobs WHERE grp = 'other' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		others = append(others, id)
	}
	rows.Close()
	const stmt = "DELETE FROM `jobs` WHERE `id` IN (?, ?) LIMIT 1"
	for _, form := range []string{"lease", "rowlock", "advisory"} {
		t.Run(form, func(t *testing.T) {
			settled := make(chan core.Settlement, 1)
			app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
				core.WithObserver(func(s core.Settlement) { settled <- s }))
			ep, err := crashEndpoint(form)(db, tb, "work")
			if err != nil {
				t.Fatal(err)
			}
			handled := make(chan error, 1)
			if err := core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[string]) error {
				tx, err := sqlqueue.Tx(ctx)
				if err == nil {
					_, err = tx.Exec(ctx, stmt, others...)
				}
				handled <- err
				return core.Retry() // roll the handler's writes back: each form deletes afresh
			}, sqlqueue.Transactional(), sqlqueue.BatchSize(1)); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- app.Run(runCtx) }()
			defer func() { stop(); <-done }()
			select {
			case err := <-handled:
				if err != nil {
					t.Fatalf("the handler's %s failed: %v", stmt, err)
				}
			case <-time.After(coretest.WaitTimeout):
				t.Fatal("no delivery")
			}
			<-settled
		})
	}
	var left int
	if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs WHERE grp = 'other'").Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d rows of group other left (%v); the retried handlers' deletes must have rolled back", left, err)
	}
}

// record is a database/sql driver that keeps the text of every statement it is given and
// answers with no rows, so that a test sees exactly what a DB sends.
type record struct {
	mu   sync.Mutex
	sent []string
}

func (r *record) note(q string) {
	r.mu.Lock()
	r.sent = append(r.sent, q)
	r.mu.Unlock()
}

func (r *record) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sent) == 0 {
		return ""
	}
	return r.sent[len(r.sent)-1]
}

func (r *record) Open(string) (sqldriver.Conn, error)             { return recConn{r}, nil }
func (r *record) Connect(context.Context) (sqldriver.Conn, error) { return recConn{r}, nil }
func (r *record) Driver() sqldriver.Driver                        { return r }

type recConn struct{ r *record }

func (c recConn) Prepare(string) (sqldriver.Stmt, error) {
	return nil, errors.New("record: no prepare")
}
func (c recConn) Close() error                 { return nil }
func (c recConn) Begin() (sqldriver.Tx, error) { return recTx{}, nil }
func (c recConn) ExecContext(_ context.Context, q string, _ []sqldriver.NamedValue) (sqldriver.Result, error) {
	c.r.note(q)
	return sqldriver.RowsAffected(0), nil
}
func (c recConn) QueryContext(_ context.Context, q string, _ []sqldriver.NamedValue) (sqldriver.Rows, error) {
	c.r.note(q)
	return recRows{}, nil
}

type recTx struct{}

func (recTx) Commit() error   { return nil }
func (recTx) Rollback() error { return nil }

type recRows struct{}

func (recRows) Columns() []string            { return []string{"x"} }
func (recRows) Close() error                 { return nil }
func (recRows) Next([]sqldriver.Value) error { return io.EOF }

// FuzzStatementHints: statements that do not come from the engine reach the driver exactly as
// given, through every Queryer the dialect hands out (the pool, its transactions, a reserved
// connection and its transactions); the engine's by-id statements, rendered for any table the
// engine accepts, carry the primary-key hint and are otherwise the engine's text, and MariaDB
// prepares them (when reachable).
func FuzzStatementHints(f *testing.F) {
	f.Add("DELETE FROM `jobs` WHERE `id` IN (1, 2) LIMIT 1", "", "jobs", "id", uint8(0))
	f.Add("UPDATE `jobs` SET `attempt` = 0 WHERE `id` IN (1)", "s", "jobs", "ID", uint8(1))
	f.Add("DELETE FROM `jobs` WHERE `locked_until` = ? AND `id` IN (?, ?)", "", "J$1", "x", uint8(0x7f))
	f.Add("SELECT 1", "", "t", "id", uint8(0x10))
	ctx := context.Background()
	rec := &record{}
	pool := sql.OpenDB(rec)
	f.Cleanup(func() { pool.Close() })
	local := &DB{pool: pool}
	local.q = &queueDB{db: local}
	server, scratch := scratchDatabase(f, coretest.MariaDBDSN())
	d := newDialect(Version{Flavour: MariaDB}, nil)
	f.Fuzz(func(t *testing.T, text, schema, name, id string, drop uint8) {
		send := func(how string, q sqlqueue.Queryer, query bool) {
			var err error
			if query {
				var rows sqlqueue.Rows
				if rows, err = q.Query(ctx, text); err == nil {
					rows.Close()
				}
			} else {
				_, err = q.Exec(ctx, text)
			}
			if err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			if got := rec.last(); got != text {
				t.Fatalf("%s sent\n%q\nfor\n%q", how, got, text)
			}
		}
		for _, query := range []bool{false, true} {
			send("the pool", local.q, query)
			tx, err := local.q.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			send("a pool transaction", tx, query)
			_ = tx.Rollback(ctx)
			c, err := local.q.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			send("a reserved connection", c, query)
			ctx2, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			send("a connection's transaction", ctx2, query)
			_ = ctx2.Rollback(ctx)
			c.Close()
		}

		tb := fuzzTable(schema, name, id, "payload", "", "", drop|1) // no group column: the ids alone
		sch, err := driver.NewSchema(d, tb)
		if err != nil {
			return
		}
		upd, del := d.UpdateByIDs(sch.QTable), d.DeleteByIDs(sch.QTable)
		if upd != "UPDATE "+sch.QTable+" FORCE INDEX (PRIMARY)" || del != "DELETE "+sch.QTable+" FROM "+sch.QTable+" FORCE INDEX (PRIMARY)" {
			t.Fatalf("heads for %s: %s / %s", sch.QTable, upd, del)
		}
		if server == nil || sch.LockedUntil == "" {
			return
		}
		if tb.Schema != "" {
			tb.Schema = scratch
			if sch, err = driver.NewSchema(d, tb); err != nil {
				t.Fatal(err)
			}
			upd, del = d.UpdateByIDs(sch.QTable), d.DeleteByIDs(sch.QTable)
		}
		ddl, err := TableDDL(tb)
		if err != nil {
			t.Fatalf("TableDDL refuses a table NewSchema accepts: %v", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := server.ExecContext(tctx, ddl); err != nil {
			t.Fatalf("creating %s: %v", sch.QTable, err)
		}
		defer server.ExecContext(ctx, "DROP TABLE "+quote(scratch)+"."+quote(tb.Name))
		// The grouped lease settlements, as the engine renders them with these heads.
		set := sch.LockedUntil + " = NULL"
		stmts := []string{
			del + " WHERE " + sch.LockedUntil + " = ? AND " + sch.ID + " IN (?, ?, ?)",
			upd + " SET " + set + " WHERE " + sch.LockedUntil + " = ? AND " + sch.ID + " IN (?)",
		}
		for _, s := range stmts {
			st, err := server.PrepareContext(tctx, s)
			if err != nil {
				t.Fatalf("MariaDB does not prepare %s: %v", s, err)
			}
			st.Close()
		}
	})
}

// TestPinnedSettlementUsesPrimaryKey shows the plan difference the hints exist for: on a table
// whose statistics are stale the grouped delete scans; pinned, it reads by key.
func TestPinnedSettlementUsesPrimaryKey(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	tb.Columns.Group, tb.Columns.ProcessedAt = "", ""
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO jobs (payload) SELECT 'x' FROM seq_1_to_20"); err != nil {
		t.Fatal(err)
	}
	where := " WHERE `locked_until` = ? AND `id` IN (" + strings.TrimSuffix(strings.Repeat("?, ", 15), ", ") + ")"
	args := []any{nil}
	for i := 1; i <= 15; i++ {
		args = append(args, i)
	}
	plan := func(sql string) string {
		rows, err := db.Pool().QueryContext(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		var typ []byte
		for i := range vals {
			vals[i] = new(any)
			if cols[i] == "type" {
				vals[i] = &typ
			}
		}
		if !rows.Next() {
			t.Fatal("EXPLAIN returned nothing")
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		return string(typ)
	}
	q := "DELETE FROM `jobs`" + where
	if got := plan(q); got != "ALL" {
		t.Logf("unpinned plan is %q here (the optimizer's estimate decides)", got)
	}
	if got := plan(db.dialect.DeleteByIDs("`jobs`") + where); got != "range" {
		t.Fatalf("pinned plan is %q; want range on PRIMARY", got)
	}
}
