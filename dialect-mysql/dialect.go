package mysql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// dialect spells settle's statements for one flavour. MySQL and MariaDB share every claim and
// finishing statement; they differ in INSERT … RETURNING (MariaDB only), which Publish uses
// to learn a new row's id, and MySQL reads LAST_INSERT_ID() instead.
type dialect struct {
	flavour Flavour
	log     *slog.Logger
	// jsonTable: the server has JSON_TABLE, which the grouped settlement's derived table of
	// ids uses (grouped.go); false for a dialect not yet bound to a server.
	jsonTable bool
}

var (
	_ driver.LeaseDialect    = (*dialect)(nil)
	_ driver.RowLockDialect  = (*dialect)(nil)
	_ driver.AdvisoryDialect = (*dialect)(nil)
	_ driver.AdvisoryFilter  = (*dialect)(nil)
	_ driver.ByIDHints       = (*dialect)(nil)
	_ driver.TableIdentity   = (*dialect)(nil)
	_ driver.SQLFamily       = (*dialect)(nil)
	_ driver.DDLTypes        = (*dialect)(nil)
)

// tableSQL finds a table's schema and name as the catalogue stores them; an empty schema means
// the connection's current database.
const tableSQL = `SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?`

// CanonicalTable returns t as information_schema.TABLES has it: the database filled in from the
// connection's current one when t names none, and the names as the server stores them (folded
// to lower case where lower_case_table_names says so). Where the catalogue compares names
// without case but stores them as created, the stored name that equals t's exactly wins.
func (d *dialect) CanonicalTable(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) (sqlqueue.TableRef, error) {
	rows, err := q.Query(ctx, tableSQL, t.Schema, t.Name)
	if err != nil {
		return sqlqueue.TableRef{}, fmt.Errorf("mysql: resolving table %s: %w", t, err)
	}
	defer rows.Close()
	var found []sqlqueue.TableRef
	for rows.Next() {
		var r sqlqueue.TableRef
		if err := rows.Scan(&r.Schema, &r.Name); err != nil {
			return sqlqueue.TableRef{}, fmt.Errorf("mysql: resolving table %s: %w", t, err)
		}
		found = append(found, r)
	}
	if err := rows.Err(); err != nil {
		return sqlqueue.TableRef{}, fmt.Errorf("mysql: resolving table %s: %w", t, err)
	}
	switch len(found) {
	case 0:
		return sqlqueue.TableRef{}, fmt.Errorf("mysql: table %s does not exist in information_schema.TABLES", t)
	case 1:
		return found[0], nil
	}
	for _, r := range found {
		if r.Name == t.Name && (t.Schema == "" || r.Schema == t.Schema) {
			return r, nil
		}
	}
	return sqlqueue.TableRef{}, fmt.Errorf("mysql: table %s matches %d tables that differ only in case: %v", t, len(found), found)
}

// UpdateByIDs pins the primary key on the engine's UPDATEs that name many rows by id (a grouped
// lease settlement, the lease claim's stamp): InnoDB's statistics of a queue table are nearly
// always stale (it fills and drains faster than they are recalculated), and with a small row
// estimate the optimizer scans the whole table; a scanning statement locks every row it reads
// and waits on rows other claimants hold, which turns concurrent settlements into lock waits
// and deadlocks (measured on MariaDB 10.11: the first grouped settlements after a bulk insert
// deadlocked). By the primary key, each statement locks exactly its own rows.
func (d *dialect) UpdateByIDs(qtable string) string {
	return "UPDATE " + qtable + " FORCE INDEX (PRIMARY)"
}

// DeleteByIDs pins the primary key on the engine's DELETEs that name many rows by id (see
// UpdateByIDs). A single-table DELETE takes no index hint, so the statement is spelled in the
// multi-table form, which does; the engine's grouped DELETE has no ORDER BY or LIMIT, which that
// form refuses.
func (d *dialect) DeleteByIDs(qtable string) string {
	return "DELETE " + qtable + " FROM " + qtable + " FORCE INDEX (PRIMARY)"
}

// skipLocked follows a claim's SELECT: rows another claim holds are passed over, not waited for.
const skipLocked = " FOR UPDATE SKIP LOCKED"

func newDialect(v Version, log *slog.Logger) *dialect {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &dialect{flavour: v.Flavour, log: log, jsonTable: v.hasJSONTable()}
}

// Family is sqlqueue.FamilyMySQL or sqlqueue.FamilyMariaDB, by the server's flavour.
func (d *dialect) Family() sqlqueue.Family {
	if d.flavour == MariaDB {
		return sqlqueue.FamilyMariaDB
	}
	return sqlqueue.FamilyMySQL
}

// DDLTypes are the column types of MySQL 8 and MariaDB (where JSON is LONGTEXT with a check).
func (d *dialect) DDLTypes() driver.Types {
	return driver.Types{ID: "BIGINT AUTO_INCREMENT PRIMARY KEY", Integer: "INT", Text: "VARCHAR(191)", Bytes: "LONGBLOB",
		JSON: "JSON", Time: "DATETIME(6)", TableOptions: " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"}
}

// Name is "mysql" or "mariadb".
func (d *dialect) Name() string { return d.flavour.String() }

// Quote quotes an identifier with backticks.
func (d *dialect) Quote(ident string) string { return quote(ident) }

// Placeholder is "?".
func (d *dialect) Placeholder(int) string { return "?" }

// Time stores timestamps as UTC DATETIME(6) values: the driver sends a time.Time as
// 'YYYY-MM-DD hh:mm:ss.ffffff', so a lease token written by a claim compares equal to the
// token its settlement sends. The column must keep microseconds (DATETIME(6) or
// TIMESTAMP(6)); the start-up check refuses a lease column that would round them away.
func (d *dialect) Time(t time.Time) any { return t.UTC().Truncate(time.Microsecond) }

// Returning reports INSERT … RETURNING: MariaDB has it (10.5+), MySQL does not.
func (d *dialect) Returning() bool { return d.flavour == MariaDB }

// columnsSQL reads a table's columns from the catalogue; an empty schema means the
// connection's current database.
const columnsSQL = `SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, COALESCE(DATETIME_PRECISION, 0)
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?
ORDER BY ORDINAL_POSITION`

// Columns lists the columns of t from information_schema.COLUMNS.
func (d *dialect) Columns(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) ([]driver.ColumnInfo, error) {
	cols, err := readColumns(ctx, q, t)
	if err != nil {
		return nil, err
	}
	out := make([]driver.ColumnInfo, len(cols))
	for i, c := range cols {
		out[i] = c.ColumnInfo
	}
	return out, nil
}

// column is a catalogue column with what only MySQL's catalogue tells: the fractional-second
// precision of a date/time column.
type column struct {
	driver.ColumnInfo
	precision int
}

func readColumns(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) ([]column, error) {
	rows, err := q.Query(ctx, columnsSQL, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("mysql: reading the columns of %s from information_schema: %w", t, err)
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var c column
		var dataType string
		var prec int64
		if err := rows.Scan(&c.Name, &c.Type, &dataType, &prec); err != nil {
			return nil, fmt.Errorf("mysql: reading the columns of %s: %w", t, err)
		}
		c.Kind = kindOf(strings.ToLower(dataType), strings.ToLower(c.Type))
		c.precision = int(prec)
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: reading the columns of %s: %w", t, err)
	}
	return cols, rows.Close()
}

// kindOf classifies a column by its DATA_TYPE and COLUMN_TYPE: BOOLEAN is TINYINT(1) on both
// flavours, so that spelling is a boolean.
func kindOf(dataType, columnType string) driver.ColumnKind {
	if columnType == "tinyint(1)" || columnType == "tinyint(1) unsigned" {
		return driver.KindBool
	}
	switch dataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return driver.KindInteger
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return driver.KindText
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return driver.KindBytes
	case "json":
		return driver.KindJSON
	case "datetime", "timestamp":
		return driver.KindTime
	case "boolean", "bool":
		return driver.KindBool
	case "float", "double", "decimal", "real":
		return driver.KindFloat
	case "date", "time", "year", "bit", "geometry", "point", "uuid", "inet4", "inet6":
		// A date keeps no time of day, a time or year no date: none holds a lease token.
		return driver.KindOther
	}
	return driver.KindUnknown // enum, set and the like
}

// RowLockClaim selects ready rows with FOR UPDATE SKIP LOCKED in the claim transaction.
func (d *dialect) RowLockClaim(s *driver.Schema) (driver.Claim, error) {
	return retryingClaim{inner: driver.SelectClaim(s, skipLocked), log: d.log, table: s.Table.Ref()}, nil
}

// LeaseClaim selects ready rows with FOR UPDATE SKIP LOCKED, then stamps the token and
// attempt + 1 on them with one UPDATE, in one short transaction (neither flavour has
// UPDATE … RETURNING).
func (d *dialect) LeaseClaim(s *driver.Schema) (driver.Claim, error) {
	return retryingClaim{inner: driver.SelectThenUpdateClaim(s, skipLocked), log: d.log, table: s.Table.Ref()}, nil
}

// claimRetries is how often a claim that lost a race for locks is run again in a fresh
// transaction before its error is returned (and the engine tries again after a backoff).
const claimRetries = 5

// retryingClaim runs a claim again when InnoDB chose it as a deadlock victim (1213) or it
// waited too long for a lock (1205): the server has rolled back the transaction or the
// statement, nothing was claimed, and a fresh transaction is the cure. The claim's transaction
// is restarted in place, with the statements that preceded the claim in it run again (the
// engine settles finished deliveries and claims in one transaction); when they no longer
// match the same rows, or a query preceded the claim, the error is returned to the engine,
// which settles on its own and claims again later. Either way no handler sees it.
type retryingClaim struct {
	inner driver.Claim
	log   *slog.Logger
	table sqlqueue.TableRef
}

// claimRestarts counts restarted claims, for tests to report.
var claimRestarts atomic.Int64

func (c retryingClaim) Claim(ctx context.Context, tx sqlqueue.Queryer, p driver.ClaimParams, dst []driver.Claimed) ([]driver.Claimed, error) {
	t, ok := tx.(*txn)
	restartable := ok && t.replayable()
	prefix := 0
	if restartable {
		prefix = len(t.log)
	}
	start := len(dst)
	for i := 0; ; i++ {
		out, err := c.inner.Claim(ctx, tx, p, dst)
		if err == nil || !restartable || i == claimRetries || !IsTransient(err) || ctx.Err() != nil {
			return out, err
		}
		clear(out[start:])
		dst = out[:start]
		claimRestarts.Add(1)
		c.log.Debug("mysql: claim lost a race for row locks; running its transaction again", "table", c.table.String(), "try", i+1, "error", err)
		if rerr := t.restart(ctx, prefix); rerr != nil {
			return dst, fmt.Errorf("%w (restarting the claim's transaction after it failed: %v)", err, rerr)
		}
	}
}

// ErrUnlockUnconfirmed is wrapped by the error of an advisory unlock that the server did not
// confirm (RELEASE_LOCK returned 0 or NULL, or failed): the connection that may still hold the
// lock has been closed, which releases it.
var ErrUnlockUnconfirmed = errors.New("mysql: advisory lock release not confirmed; connection closed")

// TryLock takes the key's lock with GET_LOCK(name, 0) on c, without waiting. The name is
// settle's prefix, the database and the key, hashed past 64 characters (lockName).
func (d *dialect) TryLock(ctx context.Context, c driver.Conn, key string) (bool, error) {
	rows, err := c.Query(ctx, "SELECT GET_LOCK(?, 0)", lockName(key))
	if err != nil {
		return false, err
	}
	var got *int64
	if err := scanOne(rows, &got); err != nil {
		return false, err
	}
	return got != nil && *got == 1, nil
}

// Unlock releases the key's lock with RELEASE_LOCK on c. A release the server does not
// confirm (an error, or a result other than 1) closes c for good, so that whatever c held
// goes with its session, and is reported as ErrUnlockUnconfirmed.
func (d *dialect) Unlock(ctx context.Context, c driver.Conn, key string) error {
	name := lockName(key)
	rows, err := c.Query(ctx, "SELECT RELEASE_LOCK(?)", name)
	var got *int64
	if err == nil {
		err = scanOne(rows, &got)
	}
	if err == nil && got != nil && *got == 1 {
		return nil
	}
	_ = c.Discard()
	if err != nil {
		err = fmt.Errorf("%w: RELEASE_LOCK(%q): %w", ErrUnlockUnconfirmed, name, err)
	} else {
		res := "NULL (no such lock)"
		if got != nil {
			res = "0 (held by another session)"
		}
		err = fmt.Errorf("%w: RELEASE_LOCK(%q) returned %s", ErrUnlockUnconfirmed, name, res)
	}
	d.log.Warn("mysql: advisory unlock not confirmed; the connection was closed, which releases its locks", "lock", name, "error", err)
	return err
}

// KeyText reads a key expression back as text.
func (d *dialect) KeyText(expr string) string { return "CAST(" + expr + " AS CHAR)" }

func scanOne(rows sqlqueue.Rows, dst any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("mysql: no row returned")
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	return rows.Close()
}

// KeyFree leaves rows whose GET_LOCK name another connection holds out of the advisory
// candidates query: IS_USED_LOCK of the same name TryLock would take, spelled in SQL by
// lockNameSQL (Go and SQL agree on every name, digests past 64 characters included).
func (d *dialect) KeyFree(prefix, keyText string) string {
	return "IS_USED_LOCK(" + lockNameSQL(prefix, keyText) + ") IS NULL"
}
