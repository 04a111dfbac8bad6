package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core/sqlqueue"
)

// maxIdent is PostgreSQL's identifier limit (NAMEDATALEN - 1): a longer name would be
// truncated silently by the server, so the dialect refuses it instead (MaxIdentifier).
const maxIdent = 63

// MaxIdentifier is PostgreSQL's identifier limit, 63 bytes: the engine refuses longer names.
func (*dialect) MaxIdentifier() int { return maxIdent }

// skipLocked follows the inner SELECT of every claim, so that concurrent claimants pass over
// each other's rows instead of waiting for them.
const skipLocked = " FOR UPDATE SKIP LOCKED"

// dialect spells SQL for PostgreSQL. It implements sqlqueue.Dialect, LeaseDialect,
// RowLockDialect, AdvisoryDialect and Mover; notifyDialect adds Notifier.
type dialect struct {
	// keyFunc turns the advisory key text into the bigint key: "hashtextextended(%s, 0)".
	keyFunc string
	// lockSQL and unlockSQL are rendered once from keyFunc.
	lockSQL, unlockSQL string
}

func newDialect(keyFunc string) *dialect {
	return &dialect{
		keyFunc:   keyFunc,
		lockSQL:   "SELECT pg_try_advisory_lock(" + fmt.Sprintf(keyFunc, "$1::text") + ")",
		unlockSQL: "SELECT pg_advisory_unlock(" + fmt.Sprintf(keyFunc, "$1::text") + ")",
	}
}

var (
	_ sqlqueue.LeaseDialect    = (*dialect)(nil)
	_ sqlqueue.RowLockDialect  = (*dialect)(nil)
	_ sqlqueue.AdvisoryDialect = (*dialect)(nil)
	_ sqlqueue.Mover           = (*dialect)(nil)
	_ sqlqueue.TableIdentity   = (*dialect)(nil)
	_ sqlqueue.IdentifierLimit = (*dialect)(nil)
	_ sqlqueue.AdvisoryFilter  = (*dialect)(nil)
	_ sqlqueue.GroupedRowLock  = (*dialect)(nil)
	_ sqlqueue.Notifier        = (*notifyDialect)(nil)
)

// Name is "postgres".
func (*dialect) Name() string { return "postgres" }

// Quote double-quotes ident (the engine has validated it; doubling quotes keeps it safe anyway).
func (*dialect) Quote(ident string) string { return pgx.Identifier{ident}.Sanitize() }

// placeholders are the first markers, rendered once.
var placeholders = func() []string {
	p := make([]string, 65)
	for i := range p {
		p[i] = "$" + strconv.Itoa(i)
	}
	return p
}()

// Placeholder is $n.
func (*dialect) Placeholder(n int) string {
	if n < len(placeholders) {
		return placeholders[n]
	}
	return "$" + strconv.Itoa(n)
}

// Time passes t as it is: pgx encodes time.Time as timestamptz (or timestamp) at the
// microsecond precision PostgreSQL stores, so equal times compare equal as lease tokens.
func (*dialect) Time(t time.Time) any { return t }

// Returning is true: INSERT … RETURNING id.
func (*dialect) Returning() bool { return true }

// Columns reads the table's columns from pg_attribute, resolving t as the statements will
// (search_path for an unqualified name). A domain column is classified by its base type. A
// named schema that does not exist is an error of its own, so that it is not reported as a
// missing table.
func (d *dialect) Columns(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) ([]sqlqueue.ColumnInfo, error) {
	if err := sqlqueue.CheckIdentifier(d, "table name", t.Name); err != nil {
		return nil, err
	}
	if err := sqlqueue.CheckIdentifier(d, "schema name", t.Schema); err != nil {
		return nil, err
	}
	if t.Schema != "" {
		rows, err := q.Query(ctx, `SELECT 1 FROM pg_namespace WHERE nspname = $1`, t.Schema)
		if err != nil {
			return nil, err
		}
		found := rows.Next()
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("postgres: table %s: schema %q does not exist", t, t.Schema)
		}
	}
	rows, err := q.Query(ctx, columnsSQL, quoteRef(t))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []sqlqueue.ColumnInfo
	for rows.Next() {
		var c sqlqueue.ColumnInfo
		var base string
		if err := rows.Scan(&c.Name, &c.Type, &base); err != nil {
			return nil, err
		}
		c.Kind = kindOf(base)
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return cols, rows.Close()
}

const columnsSQL = `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), bt.typname::text
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// kindOf classifies a base type name from pg_type.
func kindOf(typname string) sqlqueue.ColumnKind {
	switch typname {
	case "int2", "int4", "int8":
		return sqlqueue.KindInteger
	case "text", "varchar", "bpchar", "name", "citext":
		return sqlqueue.KindText
	case "bytea":
		return sqlqueue.KindBytes
	case "json", "jsonb":
		return sqlqueue.KindJSON
	case "timestamptz", "timestamp":
		return sqlqueue.KindTime
	case "bool":
		return sqlqueue.KindBool
	case "float4", "float8", "numeric", "money":
		return sqlqueue.KindFloat
	case "date", "time", "timetz", "interval", "uuid", "inet", "cidr", "macaddr", "xml", "bit", "varbit", "tsvector", "point":
		// A date keeps no time of day, a time no date: neither holds a lease token or a delay.
		return sqlqueue.KindOther
	}
	return sqlqueue.KindUnknown // a domain, an enum, an extension's type
}

func quoteRef(t sqlqueue.TableRef) string {
	if t.Schema != "" {
		return pgx.Identifier{t.Schema, t.Name}.Sanitize()
	}
	return pgx.Identifier{t.Name}.Sanitize()
}

// LeaseClaim is one statement: UPDATE … SET locked_until = token, attempt = attempt + 1
// WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING ….
func (*dialect) LeaseClaim(s *sqlqueue.Schema) (sqlqueue.Claim, error) {
	return sqlqueue.UpdateReturningClaim(s, skipLocked), nil
}

// RowLockClaim selects ready rows FOR UPDATE SKIP LOCKED in the claim transaction.
func (*dialect) RowLockClaim(s *sqlqueue.Schema) (sqlqueue.Claim, error) {
	return sqlqueue.SelectClaim(s, skipLocked), nil
}

// TryLock takes the session-level advisory lock of key on c without waiting.
func (d *dialect) TryLock(ctx context.Context, c sqlqueue.Conn, key string) (bool, error) {
	rows, err := c.Query(ctx, d.lockSQL, key)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var got bool
	if rows.Next() {
		if err := rows.Scan(&got); err != nil {
			return false, err
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	return got, rows.Close()
}

// Unlock releases key on c. PostgreSQL answers false when c did not hold the key; that is an
// error, because the lock the engine believed in was not there.
func (d *dialect) Unlock(ctx context.Context, c sqlqueue.Conn, key string) error {
	rows, err := c.Query(ctx, d.unlockSQL, key)
	if err != nil {
		return err
	}
	defer rows.Close()
	var released bool
	if rows.Next() {
		if err := rows.Scan(&released); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if !released {
		return fmt.Errorf("postgres: advisory key %q was not held by the delivery's connection", key)
	}
	return nil
}

// KeyText reads the key expression back as text, prefixed with the row's table oid: advisory
// locks are database-wide, and without the prefix row 7 of one queue table would wait for
// row 7 of another. (The expression also gets a result column name of its own: a bare cast
// would be named after the key's column, and with the default key, the id, ORDER BY id
// would then be ambiguous.)
func (*dialect) KeyText(expr string) string {
	return "(tableoid::text || ':' || COALESCE((" + expr + ")::text, ''))"
}

// GroupRowLockSettlements: a claim's acks and drops run as one DELETE (or UPDATE) … WHERE id
// IN (…) at its commit; PostgreSQL locks exactly the rows it names.
func (*dialect) GroupRowLockSettlements() bool { return true }

// KeyFree skips rows whose advisory key any session holds: the key's bigint, as keyFunc makes
// it, is not among the advisory locks pg_locks lists for this database. (A bigint lock shows
// in pg_locks as classid = its high 32 bits, objid = its low 32 bits, objsubid = 1.) PostgreSQL
// runs the subquery once per candidates query, not once per row.
func (d *dialect) KeyFree(prefix, keyText string) string {
	return fmt.Sprintf(d.keyFunc, "('"+strings.ReplaceAll(prefix, "'", "''")+"' || "+keyText+")") +
		" NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l" +
		" WHERE l.locktype = 'advisory' AND l.objsubid = 1" +
		" AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
}

// CanonicalTable resolves t through the catalogue as PostgreSQL does for a statement on this
// connection (to_regclass: an unqualified name through the search_path), and returns the
// schema and name it finds, as stored: "public"."jobs" for both jobs and public.jobs.
func (d *dialect) CanonicalTable(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef) (sqlqueue.TableRef, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`, quoteRef(t))
	if err != nil {
		return sqlqueue.TableRef{}, fmt.Errorf("postgres: resolving table %s: %w", t, err)
	}
	defer rows.Close()
	var out sqlqueue.TableRef
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return out, fmt.Errorf("postgres: resolving table %s: %w", t, err)
		}
		return out, fmt.Errorf("postgres: table %s does not exist (to_regclass found no relation)", t)
	}
	if err := rows.Scan(&out.Schema, &out.Name); err != nil {
		return out, fmt.Errorf("postgres: resolving table %s: %w", t, err)
	}
	return out, rows.Close()
}

// MoveStatement moves rows in one statement: WITH moved AS (DELETE … RETURNING *) INSERT INTO
// to (…) SELECT … FROM moved.
func (*dialect) MoveStatement(from, to string, insertCols, selectExprs []string, where string) string {
	return "WITH moved AS (DELETE FROM " + from + " WHERE " + where + " RETURNING *) INSERT INTO " + to +
		" (" + strings.Join(insertCols, ", ") + ") SELECT " + strings.Join(selectExprs, ", ") + " FROM moved"
}
