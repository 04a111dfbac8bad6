package periodic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue"
)

// SQLClaims claims ticks in a table of the service's own database: a row per claimed tick
// under a unique (schedule, tick) key, inserted by one statement that does nothing when the row
// exists. Exactly one process inserts it; the database decides. Create the table with DDL.
//
// As a HoldingClaimer it inserts the row in a transaction kept open while the tick is
// published: other processes asking for the tick wait for it (PostgreSQL, MySQL and MariaDB
// wait on the row, SQLite on its writer lock, up to its busy timeout) and get the tick if the
// publishing process dies or fails before its commit.
type SQLClaims struct {
	d            sqlqueue.Dialect
	db           sqlqueue.DB
	table        sqlqueue.TableRef
	clock        clock.Clock
	insert, drop string
}

var (
	_ HoldingClaimer = (*SQLClaims)(nil)
	_ Pruner         = (*SQLClaims)(nil)
)

// NewSQLClaims returns the claims kept in table (optionally schema-qualified) of db, spelled by
// dialect d. The dialect must declare its SQL family (sqlqueue.SQLFamily): PostgreSQL and
// SQLite insert with ON CONFLICT DO NOTHING, MySQL and MariaDB with INSERT IGNORE. c is the
// clock of the claimed_at column (nil: the real clock).
func NewSQLClaims(d sqlqueue.Dialect, db sqlqueue.DB, table string, c clock.Clock) (*SQLClaims, error) {
	if d == nil || db == nil {
		return nil, errors.New("periodic.NewSQLClaims: a dialect and a database are required")
	}
	ref, err := sqlqueue.ParseTableRef(table)
	if err != nil {
		return nil, fmt.Errorf("periodic.NewSQLClaims: table %q: %w", table, err)
	}
	if c == nil {
		c = clock.Real()
	}
	qt := d.Quote(ref.Name)
	if ref.Schema != "" {
		qt = d.Quote(ref.Schema) + "." + qt
	}
	cols := " (" + d.Quote("schedule") + ", " + d.Quote("tick") + ", " + d.Quote("claimed_at") + ") VALUES (" +
		d.Placeholder(1) + ", " + d.Placeholder(2) + ", " + d.Placeholder(3) + ")"
	s := &SQLClaims{d: d, db: db, table: ref, clock: c,
		drop: "DELETE FROM " + qt + " WHERE " + d.Quote("tick") + " < " + d.Placeholder(1)}
	switch f := sqlqueue.FamilyOf(d); f {
	case sqlqueue.FamilyPostgres, sqlqueue.FamilySQLite:
		s.insert = "INSERT INTO " + qt + cols + " ON CONFLICT DO NOTHING"
	case sqlqueue.FamilyMySQL, sqlqueue.FamilyMariaDB:
		s.insert = "INSERT IGNORE INTO " + qt + cols
	default:
		return nil, fmt.Errorf("periodic.NewSQLClaims: dialect %s declares SQL family %q; tick claims need postgres, sqlite, mysql or mariadb (an insert that does nothing on a duplicate key)", d.Name(), f)
	}
	return s, nil
}

// Check reports whether the claims table exists, naming DDL when it does not.
func (s *SQLClaims) Check(ctx context.Context) error {
	cols, err := s.d.Columns(ctx, s.db, s.table)
	if err != nil {
		return fmt.Errorf("periodic: reading the columns of tick table %s: %w", s.table, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("periodic: tick table %s does not exist (create it with periodic.DDL)", s.table)
	}
	return nil
}

// ClaimTick inserts the claim of tick, committed at once.
func (s *SQLClaims) ClaimTick(ctx context.Context, schedule string, tick time.Time) (bool, error) {
	r, err := s.db.Exec(ctx, s.insert, schedule, tickText(tick), s.now())
	if err != nil {
		return false, s.claimErr(schedule, tick, err)
	}
	return r.RowsAffected == 1, nil
}

// HoldTick inserts the claim of tick in a transaction that finish commits (keep) or rolls back.
func (s *SQLClaims) HoldTick(ctx context.Context, schedule string, tick time.Time) (bool, func(context.Context, bool) error, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, nil, s.claimErr(schedule, tick, err)
	}
	r, err := tx.Exec(ctx, s.insert, schedule, tickText(tick), s.now())
	if err != nil || r.RowsAffected != 1 {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if err != nil {
			return false, nil, s.claimErr(schedule, tick, err)
		}
		return false, nil, nil
	}
	finish := func(ctx context.Context, keep bool) error {
		if !keep {
			return tx.Rollback(ctx)
		}
		if err := tx.Commit(ctx); err != nil {
			return s.claimErr(schedule, tick, err)
		}
		return nil
	}
	return true, finish, nil
}

// PruneTicks deletes the claims of ticks before before.
func (s *SQLClaims) PruneTicks(ctx context.Context, before time.Time) (int64, error) {
	r, err := s.db.Exec(ctx, s.drop, tickText(before))
	if err != nil {
		return 0, fmt.Errorf("periodic: pruning tick table %s: %w", s.table, err)
	}
	return r.RowsAffected, nil
}

func (s *SQLClaims) now() any { return s.d.Time(s.clock.Now().UTC().Truncate(time.Microsecond)) }

func (s *SQLClaims) claimErr(schedule string, tick time.Time, err error) error {
	return fmt.Errorf("periodic: claiming tick %s in table %s: %w", TickID(schedule, tick), s.table, err)
}

// DDL returns the CREATE TABLE statement of a tick table named table for dialect d, from the
// column types d declares (sqlqueue.DDLTypes): schedule and tick (text) under one primary key,
// and claimed_at.
func DDL(d sqlqueue.Dialect, table string) (string, error) {
	ref, err := sqlqueue.ParseTableRef(table)
	if err != nil {
		return "", fmt.Errorf("periodic.DDL: table %q: %w", table, err)
	}
	if err := sqlqueue.CheckIdentifier(d, "tick table name", ref.Name); err != nil {
		return "", err
	}
	dt, ok := d.(sqlqueue.DDLTypes)
	if !ok {
		return "", fmt.Errorf("periodic.DDL: dialect %s declares no column types (sqlqueue.DDLTypes); create table %s yourself with the columns schedule and tick (text, together the primary key) and claimed_at (a time as the dialect stores it)", d.Name(), table)
	}
	ty, q := dt.DDLTypes(), d.Quote
	name := q(ref.Name)
	if ref.Schema != "" {
		name = q(ref.Schema) + "." + name
	}
	return "CREATE TABLE IF NOT EXISTS " + name + " (\n" +
		"  " + q("schedule") + " " + ty.Text + " NOT NULL,\n" +
		"  " + q("tick") + " " + ty.Text + " NOT NULL,\n" +
		"  " + q("claimed_at") + " " + ty.Time + " NOT NULL,\n" +
		"  PRIMARY KEY (" + q("schedule") + ", " + q("tick") + ")\n)" + ty.TableOptions, nil
}
