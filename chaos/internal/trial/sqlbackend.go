package trial

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL's client, as database/sql
	_ "github.com/mattn/go-sqlite3"    // SQLite's client
	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
	"github.com/settlehq/settle/core/sqlqueue"
	mysql "github.com/settlehq/settle/dialect-mysql"
	postgres "github.com/settlehq/settle/dialect-postgres"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// sqlBackend is a queue table in the suite's own PostgreSQL or MariaDB server, or in a SQLite
// file of the trial. The driver reads and writes it with the database's own client.
type sqlBackend struct {
	kind      string // postgres, mariadb, sqlite
	form      string
	env       *Env
	db        *sql.DB
	table     string // the queue table's name
	side      string // the side table's name
	workerDSN string
	file      string // sqlite
}

const (
	queueGroup = "q"
	deadGroup  = "dead"
)

func (b *sqlBackend) name() string { return b.kind }

func (b *sqlBackend) quote(s string) string {
	if b.kind == "mariadb" {
		return "`" + s + "`"
	}
	return `"` + s + `"`
}

func (b *sqlBackend) ph(n int) string {
	if b.kind == "postgres" {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// prepare opens the driver's connection and creates the trial's queue and side tables.
func (b *sqlBackend) prepare(ctx context.Context, r *run) error {
	b.table, b.side = "q_"+r.id, "s_"+r.id
	var err error
	switch b.kind {
	case "postgres":
		pg, e := b.env.postgres(ctx)
		if e != nil {
			return e
		}
		b.db, err = sql.Open("pgx", pg.URL(chaosDB)+"&application_name=chaos-driver")
		b.workerDSN = pg.URL(chaosDB) + "&application_name=chaos-worker&pool_max_conns=" + strconv.Itoa(4*r.sc.Handlers+8)
	case "mariadb":
		m, e := b.env.mariadb(ctx)
		if e != nil {
			return e
		}
		b.db, err = sql.Open("mysql", m.DSN(chaosDB))
		b.workerDSN = m.DSN(chaosDB)
	case "sqlite":
		b.file = filepath.Join(r.dir, "queue.db")
		b.db, err = sql.Open("sqlite3", "file:"+b.file+"?_busy_timeout=10000&_journal_mode=WAL")
		b.workerDSN = b.file
	}
	if err != nil {
		return err
	}
	t := sqlqueue.StandardTable(b.table)
	ddl, err := tableDDL(b.kind, t)
	if err != nil {
		return err
	}
	for _, stmt := range strings.Split(ddl, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := b.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: create queue table %s: %w", b.kind, b.table, err)
		}
	}
	if r.sc.Plugin {
		// The audit plugin's ack writes an audit row: its table, in the plugin's own DDL.
		out, err := exec.CommandContext(ctx, b.env.PluginBin, "-print-ddl", b.kind, "-audit-table", "a_"+r.id).Output()
		if err != nil {
			return fmt.Errorf("%s -print-ddl: %w", b.env.PluginBin, err)
		}
		if _, err := b.db.ExecContext(ctx, string(out)); err != nil {
			return fmt.Errorf("%s: create the audit table: %w", b.kind, err)
		}
	}
	sideDDL := "CREATE TABLE " + b.quote(b.side) + " (msg_id VARCHAR(64) NOT NULL, attempt INT NOT NULL, worker VARCHAR(64) NOT NULL)"
	if _, err := b.db.ExecContext(ctx, sideDDL); err != nil {
		return fmt.Errorf("%s: create side table %s: %w", b.kind, b.side, err)
	}
	return nil
}

// tableDDL is the dialect's own DDL for a standard queue table.
func tableDDL(kind string, t sqlqueue.Table) (string, error) {
	switch kind {
	case "postgres":
		return postgres.TableDDL(t)
	case "mariadb":
		return mysql.TableDDL(t)
	}
	return sqlite.TableDDL(t)
}

func (b *sqlBackend) workerArgs(r *run) []string {
	table := b.table
	return []string{"-backend", b.kind, "-dsn", b.workerDSN, "-form", b.form, "-table", table,
		"-queue", queueGroup, "-dead", deadGroup, "-side-table", b.side}
}

// qualified is the queue table as "schema.name" in the database's default schema: the second
// spelling of one table (the advisory-key trial).
func (b *sqlBackend) qualified() string {
	switch b.kind {
	case "postgres":
		return "public." + b.table
	case "mariadb":
		return chaosDB + "." + b.table
	}
	return "main." + b.table
}

// seed inserts one row per id, in batches.
func (b *sqlBackend) seed(ctx context.Context, ids []string) error {
	const batch = 200
	for i := 0; i < len(ids); i += batch {
		chunk := ids[i:min(i+batch, len(ids))]
		var sb strings.Builder
		args := make([]any, 0, 2*len(chunk))
		sb.WriteString("INSERT INTO " + b.quote(b.table) + " (payload, grp) VALUES ")
		for j, id := range chunk {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(" + b.ph(2*j+1) + ", " + b.ph(2*j+2) + ")")
			args = append(args, []byte(`{"id":"`+id+`"}`), queueGroup)
		}
		if _, err := b.db.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("%s: seed %s: %w", b.kind, b.table, err)
		}
	}
	return nil
}

// pending counts rows of the queue not yet finished (ready, delayed or taken).
func (b *sqlBackend) pending(ctx context.Context) (int, bool, error) {
	var n int
	err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.quote(b.table)+" WHERE grp = "+b.ph(1)+" AND processed_at IS NULL", queueGroup).Scan(&n)
	return n, true, err
}

// snapshot reads every row of the queue table and the side rows.
func (b *sqlBackend) snapshot(ctx context.Context) (chaos.Snapshot, error) {
	snap := chaos.Snapshot{Messages: make(map[string]chaos.Observed)}
	headers := "headers"
	if b.kind == "postgres" {
		headers = "headers::text"
	}
	rows, err := b.db.QueryContext(ctx, "SELECT payload, grp, attempt, CASE WHEN processed_at IS NULL THEN 0 ELSE 1 END, "+headers+" FROM "+b.quote(b.table))
	if err != nil {
		return snap, fmt.Errorf("%s: read %s: %w", b.kind, b.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var payload []byte
		var grp string
		var attempt, processed int
		var hdr sql.NullString
		if err := rows.Scan(&payload, &grp, &attempt, &processed, &hdr); err != nil {
			return snap, fmt.Errorf("%s: read %s: %w", b.kind, b.table, err)
		}
		id := messageIDOf(payload)
		if id == "" {
			snap.Strangers++
			continue
		}
		o := snap.Messages[id]
		o.Copies++
		o.Count = -1
		switch {
		case grp == deadGroup:
			o.Where = chaos.Dead
			o.Count, o.CountErr = deadCount(attempt, hdr)
		case processed == 1:
			o.Where = chaos.Done
		default:
			o.Where = chaos.Pending
		}
		snap.Messages[id] = o
	}
	if err := rows.Err(); err != nil {
		return snap, err
	}
	side, err := b.db.QueryContext(ctx, "SELECT msg_id, COUNT(*) FROM "+b.quote(b.side)+" GROUP BY msg_id")
	if err != nil {
		return snap, fmt.Errorf("%s: read %s: %w", b.kind, b.side, err)
	}
	defer side.Close()
	for side.Next() {
		var id string
		var n int
		if err := side.Scan(&id, &n); err != nil {
			return snap, err
		}
		o, ok := snap.Messages[id]
		if !ok {
			o.Count = -1
		}
		o.SideRows = n
		snap.Messages[id] = o
	}
	return snap, side.Err()
}

// messageIDOf reads the message id from a seeded payload; "" when it has none.
func messageIDOf(payload []byte) string {
	var p struct{ ID string }
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	return p.ID
}

// deadCount is a dead-letter row's count: its settle-retry-count header when it has one (which
// must parse), else its attempt column.
func deadCount(attempt int, hdr sql.NullString) (int, string) {
	if hdr.Valid && hdr.String != "" && hdr.String != "null" {
		var h map[string]string
		if err := json.Unmarshal([]byte(hdr.String), &h); err == nil {
			if v, ok := h[retryCountHeader]; ok {
				n, err := parseCount(v)
				if err != nil {
					return -1, fmt.Sprintf("%s %q: %v", retryCountHeader, v, err)
				}
				return n, ""
			}
		}
	}
	if attempt < 1 {
		return -1, ""
	}
	return attempt, ""
}

// retryCountHeader is settle's count header on dead letters.
const retryCountHeader = "settle-retry-count"

// parseCount reads a count header strictly: decimal digits only.
func parseCount(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a decimal count")
	}
	return strconv.Atoi(s)
}

// terminate ends the workers' server connections: pg_terminate_backend on PostgreSQL, KILL on
// MariaDB (connections to the trial's database other than the driver's own).
func (b *sqlBackend) terminate(ctx context.Context) (int, error) {
	switch b.kind {
	case "postgres":
		var n int
		err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'chaos-worker' AND pid <> pg_backend_pid()) t").Scan(&n)
		return n, err
	case "mariadb":
		conn, err := b.db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		rows, err := conn.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID() AND command <> 'Killed'", chaosDB)
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err == nil {
				ids = append(ids, id)
			}
		}
		rows.Close()
		n := 0
		for _, id := range ids {
			if _, err := conn.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err == nil {
				n++
			}
		}
		return n, nil
	}
	return 0, errors.New("sqlite has no server connections to terminate")
}

// restart restarts the suite's own server.
func (b *sqlBackend) restart(ctx context.Context, mode servers.StopMode) error {
	switch b.kind {
	case "postgres":
		pg, err := b.env.postgres(ctx)
		if err != nil {
			return err
		}
		return pg.Restart(ctx, mode)
	case "mariadb":
		m, err := b.env.mariadb(ctx)
		if err != nil {
			return err
		}
		return m.Restart(ctx, mode)
	}
	return errors.New("sqlite has no server to restart")
}

// lockRow holds SELECT … FOR UPDATE on one row from another connection for d.
func (b *sqlBackend) lockRow(ctx context.Context, row int64, d time.Duration) error {
	if b.kind == "sqlite" {
		return errors.New("sqlite has no row locks")
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM "+b.quote(b.table)+" WHERE id = "+b.ph(1)+" FOR UPDATE", row).Scan(&id); err != nil {
		return fmt.Errorf("lock row %d of %s: %w", row, b.table, err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// cleanup drops the trial's tables (the SQLite file goes with the trial's directory).
func (b *sqlBackend) cleanup(ctx context.Context) {
	if b.db == nil {
		return
	}
	if b.kind != "sqlite" {
		for _, t := range []string{b.table, b.side, "a_" + b.table[2:]} {
			_, _ = b.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+b.quote(t))
		}
	}
	b.db.Close()
}

// strictAttempts: the lease and advisory forms count the attempt when the row is taken.
func (b *sqlBackend) strictAttempts() bool { return b.form == "lease" || b.form == "advisory" }

// sideRows: the transactional kinds' side rows are checked.
func (b *sqlBackend) sideRows() bool { return true }
