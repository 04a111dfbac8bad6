// Package sqllimit keeps settle's flow-control state (core.LimitStore) and pause flags
// (core.PauseStore) in a SQL database: the queue's own database on the SQL backends, or any
// database the service already has. It speaks through the public sqlqueue.DB and
// sqlqueue.Dialect of a dialect module (dialect-postgres, dialect-mysql, dialect-sqlite), for
// the PostgreSQL, MySQL/MariaDB and SQLite families.
//
// Three small tables hold the state (DDL returns their statements; Store.Create runs them):
//
//   - <prefix>_slots: a concurrency semaphore, one row per slot of a key, each held under a
//     lease (a process killed while it holds a slot keeps it at most until the lease ends);
//   - <prefix>_rates: one GCRA row per key, its theoretical arrival time;
//   - <prefix>_pauses: one row per paused queue.
//
// Times are the callers' (the App's clock), stored as integer microseconds since the Unix
// epoch, so that every family stores and compares them alike.
//
// A token is one statement (an upsert whose condition is the GCRA test); a slot is one read of
// the key's slots and one compare-and-set write of a free one.
package sqllimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// DefaultPrefix names the tables: settle_limit_slots, settle_limit_rates, settle_limit_pauses.
const DefaultPrefix = "settle_limit"

// Store is a core.LimitStore and core.PauseStore in a SQL database.
type Store struct {
	db     sqlqueue.DB
	d      sqlqueue.Dialect
	family sqlqueue.Family
	prefix string
	q      statements
}

var _ core.LimitStore = (*Store)(nil)

// Option configures New.
type Option func(*Store) error

var validPrefix = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// Prefix names the store's tables <prefix>_slots, <prefix>_rates and <prefix>_pauses.
func Prefix(p string) Option {
	return func(s *Store) error {
		if !validPrefix.MatchString(p) {
			return fmt.Errorf("sqllimit.Prefix(%q): a prefix is a letter or _ then up to 40 letters, digits or _", p)
		}
		s.prefix = p
		return nil
	}
}

// ErrFamily is returned by New for a dialect of a family the store has no statements for.
var ErrFamily = errors.New("sqllimit: the dialect declares no SQL family the store speaks (postgres, mysql, mariadb, sqlite)")

// New returns a Store on db, spelled for d's family (sqlqueue.FamilyOf). It does not create
// the tables: run Create, or DDL's statements in a migration.
func New(db sqlqueue.DB, d sqlqueue.Dialect, opts ...Option) (*Store, error) {
	if db == nil || d == nil {
		return nil, errors.New("sqllimit.New: no database or dialect")
	}
	s := &Store{db: db, d: d, family: sqlqueue.FamilyOf(d), prefix: DefaultPrefix}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("sqllimit.New: nil option")
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	switch s.family {
	case sqlqueue.FamilyPostgres, sqlqueue.FamilyMySQL, sqlqueue.FamilyMariaDB, sqlqueue.FamilySQLite:
	default:
		return nil, fmt.Errorf("%w: dialect %s declares %q", ErrFamily, d.Name(), s.family)
	}
	s.q = build(s.family, d, s.prefix)
	return s, nil
}

// DDL returns the statements that create the store's tables (if they do not exist) for the
// family, with the given prefix (DefaultPrefix when empty), quoted by quote.
func DDL(family sqlqueue.Family, quote func(string) string, prefix string) []string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + quote(prefix+"_slots") + " (lkey VARCHAR(255) NOT NULL, slot_no INTEGER NOT NULL, holder VARCHAR(64) NOT NULL, until_us BIGINT NOT NULL, PRIMARY KEY (lkey, slot_no))",
		"CREATE TABLE IF NOT EXISTS " + quote(prefix+"_rates") + " (lkey VARCHAR(255) NOT NULL PRIMARY KEY, tat_us BIGINT NOT NULL)",
		"CREATE TABLE IF NOT EXISTS " + quote(prefix+"_pauses") + " (queue VARCHAR(255) NOT NULL PRIMARY KEY, paused INTEGER NOT NULL, changed_us BIGINT NOT NULL)",
	}
}

// Create creates the store's tables if they do not exist.
func (s *Store) Create(ctx context.Context) error {
	for _, stmt := range DDL(s.family, s.d.Quote, s.prefix) {
		if _, err := s.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("sqllimit: creating the tables %s_*: %w", s.prefix, err)
		}
	}
	return nil
}

// statements are the store's SQL, spelled once for its family.
type statements struct {
	slots, takeFree, insertSlot, renew, release string
	take, takeFirst, readTat, backoff           string
	paused, setPause                            string
}

func build(f sqlqueue.Family, d sqlqueue.Dialect, prefix string) statements {
	p := d.Placeholder
	slots, rates, pauses := d.Quote(prefix+"_slots"), d.Quote(prefix+"_rates"), d.Quote(prefix+"_pauses")
	mysql := f == sqlqueue.FamilyMySQL || f == sqlqueue.FamilyMariaDB
	greatest := "GREATEST"
	if f == sqlqueue.FamilySQLite {
		greatest = "MAX"
	}
	var q statements
	q.slots = "SELECT slot_no, until_us FROM " + slots + " WHERE lkey = " + p(1)
	q.takeFree = "UPDATE " + slots + " SET holder = " + p(1) + ", until_us = " + p(2) +
		" WHERE lkey = " + p(3) + " AND slot_no = " + p(4) + " AND until_us = " + p(5)
	q.renew = "UPDATE " + slots + " SET until_us = " + p(1) + " WHERE lkey = " + p(2) + " AND holder = " + p(3) + " AND until_us > 0"
	q.release = "UPDATE " + slots + " SET until_us = 0, holder = '' WHERE lkey = " + p(1) + " AND holder = " + p(2)
	q.readTat = "SELECT tat_us FROM " + rates + " WHERE lkey = " + p(1)
	q.paused = "SELECT paused FROM " + pauses + " WHERE queue = " + p(1)
	// take: the insert is a key's first token; the update takes one when
	// max(tat, now) + interval - now ≤ burst·interval. Placeholders are numbered in order of
	// appearance, so that positional ones (?) work too: takeArgs lists the values.
	tat := "tat_us"
	if !mysql {
		tat = "r.tat_us"
	}
	next := func(a, b int) string { return greatest + "(" + tat + ", " + p(a) + ") + " + p(b) }
	if mysql {
		q.insertSlot = "INSERT IGNORE INTO " + slots + " (lkey, slot_no, holder, until_us) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ")"
		// MySQL's upsert cannot tell an unchanged row from an inserted one (CLIENT_FOUND_ROWS),
		// so a token is a conditional update, and a key's first token an INSERT IGNORE.
		q.take = "UPDATE " + rates + " SET tat_us = " + next(1, 2) + " WHERE lkey = " + p(3) + " AND " + next(4, 5) + " - " + p(6) + " <= " + p(7)
		q.takeFirst = "INSERT IGNORE INTO " + rates + " (lkey, tat_us) VALUES (" + p(1) + ", " + p(2) + ")"
		q.backoff = "INSERT INTO " + rates + " (lkey, tat_us) VALUES (" + p(1) + ", " + p(2) + ") ON DUPLICATE KEY UPDATE tat_us = GREATEST(tat_us, VALUES(tat_us))"
		q.setPause = "INSERT INTO " + pauses + " (queue, paused, changed_us) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ") ON DUPLICATE KEY UPDATE paused = VALUES(paused), changed_us = VALUES(changed_us)"
		return q
	}
	q.insertSlot = "INSERT INTO " + slots + " (lkey, slot_no, holder, until_us) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ") ON CONFLICT DO NOTHING"
	q.take = "INSERT INTO " + rates + " AS r (lkey, tat_us) VALUES (" + p(1) + ", " + p(2) + ") ON CONFLICT (lkey) DO UPDATE SET tat_us = " +
		next(3, 4) + " WHERE " + next(5, 6) + " - " + p(7) + " <= " + p(8)
	q.backoff = "INSERT INTO " + rates + " AS r (lkey, tat_us) VALUES (" + p(1) + ", " + p(2) + ") ON CONFLICT (lkey) DO UPDATE SET tat_us = " +
		greatest + "(r.tat_us, excluded.tat_us)"
	q.setPause = "INSERT INTO " + pauses + " (queue, paused, changed_us) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ") ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, changed_us = excluded.changed_us"
	return q
}

func us(t time.Time) int64 { return t.UnixMicro() }

// AcquireSlot implements core.LimitStore: it reads key's slots and takes a free one (never
// created, released, or with a lease that ended before now) by a compare-and-set on its row, so
// that two processes racing for one slot cannot both get it.
func (s *Store) AcquireSlot(ctx context.Context, key string, n int, holder string, now time.Time, lease time.Duration) (bool, error) {
	held := make(map[int64]int64, n)
	rows, err := s.db.Query(ctx, s.q.slots, key)
	if err != nil {
		return false, fmt.Errorf("sqllimit: reading the slots of %q: %w", key, err)
	}
	for rows.Next() {
		var no, until int64
		if err := rows.Scan(&no, &until); err != nil {
			_ = rows.Close()
			return false, fmt.Errorf("sqllimit: reading the slots of %q: %w", key, err)
		}
		held[no] = until
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqllimit: reading the slots of %q: %w", key, err)
	}
	end, nowUS := us(now.Add(lease)), us(now)
	start := rand.IntN(n) // spread racing processes over the free slots
	for i := range n {
		no := int64((start + i) % n)
		until, exists := held[no]
		var res sqlqueue.Result
		switch {
		case !exists:
			res, err = s.db.Exec(ctx, s.q.insertSlot, key, no, holder, end)
		case until <= nowUS:
			res, err = s.db.Exec(ctx, s.q.takeFree, holder, end, key, no, until)
		default:
			continue
		}
		if err != nil {
			return false, fmt.Errorf("sqllimit: taking slot %d of %q: %w", no, key, err)
		}
		if res.RowsAffected > 0 {
			return true, nil
		}
	}
	return false, nil
}

// RenewSlot implements core.LimitStore.
func (s *Store) RenewSlot(ctx context.Context, key, holder string, now time.Time, lease time.Duration) error {
	if _, err := s.db.Exec(ctx, s.q.renew, us(now.Add(lease)), key, holder); err != nil {
		return fmt.Errorf("sqllimit: renewing a slot of %q: %w", key, err)
	}
	return nil
}

// ReleaseSlot implements core.LimitStore.
func (s *Store) ReleaseSlot(ctx context.Context, key, holder string) error {
	if _, err := s.db.Exec(ctx, s.q.release, key, holder); err != nil {
		return fmt.Errorf("sqllimit: releasing a slot of %q: %w", key, err)
	}
	return nil
}

// TakeToken implements core.LimitStore in one statement when the token is there, and one
// more read to say how long to wait when it is not.
func (s *Store) TakeToken(ctx context.Context, key string, now time.Time, interval time.Duration, burst int) (time.Duration, error) {
	n, iv := us(now), interval.Microseconds()
	limit := iv * int64(burst)
	var res sqlqueue.Result
	var err error
	if s.family == sqlqueue.FamilyMySQL || s.family == sqlqueue.FamilyMariaDB {
		res, err = s.db.Exec(ctx, s.q.take, n, iv, key, n, iv, n, limit)
		if err == nil && res.RowsAffected == 0 {
			res, err = s.db.Exec(ctx, s.q.takeFirst, key, n+iv)
		}
	} else {
		res, err = s.db.Exec(ctx, s.q.take, key, n+iv, n, iv, n, iv, n, limit)
	}
	if err != nil {
		return 0, fmt.Errorf("sqllimit: taking a token of %q: %w", key, err)
	}
	if res.RowsAffected > 0 {
		return 0, nil
	}
	rows, err := s.db.Query(ctx, s.q.readTat, key)
	if err != nil {
		return 0, fmt.Errorf("sqllimit: reading the rate of %q: %w", key, err)
	}
	defer rows.Close()
	var tat int64
	if rows.Next() {
		if err := rows.Scan(&tat); err != nil {
			return 0, fmt.Errorf("sqllimit: reading the rate of %q: %w", key, err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqllimit: reading the rate of %q: %w", key, err)
	}
	wait := time.Duration(max(tat, n)+iv-n-limit) * time.Microsecond
	return max(wait, time.Microsecond), nil
}

// Backoff implements core.LimitStore.
func (s *Store) Backoff(ctx context.Context, key string, until time.Time, interval time.Duration, burst int) error {
	tat := us(until.Add(time.Duration(burst-1) * interval))
	if _, err := s.db.Exec(ctx, s.q.backoff, key, tat); err != nil {
		return fmt.Errorf("sqllimit: backing off the rate of %q: %w", key, err)
	}
	return nil
}

var _ core.PauseStore = (*Store)(nil)

// Paused implements core.PauseStore.
func (s *Store) Paused(ctx context.Context, queue string) (bool, error) {
	rows, err := s.db.Query(ctx, s.q.paused, queue)
	if err != nil {
		return false, fmt.Errorf("sqllimit: reading the pause flag of queue %q: %w", queue, err)
	}
	defer rows.Close()
	var paused int64
	if rows.Next() {
		if err := rows.Scan(&paused); err != nil {
			return false, fmt.Errorf("sqllimit: reading the pause flag of queue %q: %w", queue, err)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqllimit: reading the pause flag of queue %q: %w", queue, err)
	}
	return paused != 0, nil
}

// SetPaused implements core.PauseStore; the row also records when the flag last changed (on
// this process's clock).
func (s *Store) SetPaused(ctx context.Context, queue string, paused bool) error {
	var p int64
	if paused {
		p = 1
	}
	if _, err := s.db.Exec(ctx, s.q.setPause, queue, p, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("sqllimit: setting the pause flag of queue %q: %w", queue, err)
	}
	return nil
}
