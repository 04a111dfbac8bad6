package sqlqueue

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
)

// Form is a claim form: what holds a row while its handler works.
type Form uint8

const (
	// FormLease stamps locked_until (the delivery's token) and commits; every finishing
	// statement is fenced by the token.
	FormLease Form = iota + 1
	// FormRowLock holds the row with FOR UPDATE SKIP LOCKED in the claim transaction, whose
	// commit is the settlement.
	FormRowLock
	// FormAdvisory holds a key lock on a dedicated connection.
	FormAdvisory
)

func (f Form) String() string {
	switch f {
	case FormLease:
		return "lease"
	case FormRowLock:
		return "row lock"
	case FormAdvisory:
		return "advisory"
	}
	return "form(?)"
}

// slot is one kind of bound argument of a rendered statement.
type slot uint8

const (
	slotNow slot = iota + 1
	slotToken
	slotLimit
	slotGroup
	slotID // a row's id, bound by bindID
)

// binder renders placeholders in order and remembers which value each one takes, so that a
// statement is rendered once and bound per call.
type binder struct {
	d     Dialect
	slots []slot
}

func (b *binder) ph(s slot) string {
	b.slots = append(b.slots, s)
	return b.d.Placeholder(len(b.slots))
}

func (b *binder) bind(p ClaimParams, args []any) []any {
	for _, s := range b.slots {
		args = b.bindOne(s, p, args)
	}
	return args
}

func (b *binder) bindOne(s slot, p ClaimParams, args []any) []any {
	switch s {
	case slotNow:
		args = append(args, b.d.Time(p.Now))
	case slotToken:
		args = append(args, b.d.Time(p.Token))
	case slotLimit:
		args = append(args, int64(p.Limit))
	case slotGroup:
		args = append(args, p.Group)
	}
	return args
}

// bindID binds p with id for slotID.
func (b *binder) bindID(p ClaimParams, id int64, args []any) []any {
	for _, s := range b.slots {
		if s == slotID {
			args = append(args, id)
			continue
		}
		args = b.bindOne(s, p, args)
	}
	return args
}

// ready renders the condition of a ready row for form f.
func (s *Schema) ready(f Form, b *binder) string {
	var w []string
	if s.Group != "" {
		if s.GroupOrder {
			w = append(w, s.Group+" >= "+b.ph(slotGroup)+" AND "+s.Group+" <= "+b.ph(slotGroup))
		} else {
			w = append(w, s.Group+" = "+b.ph(slotGroup))
		}
	}
	if s.ProcessedAt != "" {
		w = append(w, s.ProcessedAt+" IS NULL")
	}
	if s.RetryAfter != "" {
		w = append(w, "("+s.RetryAfter+" IS NULL OR "+s.RetryAfter+" <= "+b.ph(slotNow)+")")
	}
	if f == FormLease && s.LockedUntil != "" {
		// A row whose lease ran out without a settlement (its process died, hung or lost its
		// connection) may be the one that killed it: only the rescue claim takes it, alone
		// (lease_rescue.go).
		if s.Lapsed {
			w = append(w, s.LockedUntil+" IS NOT NULL AND "+s.LockedUntil+" <= "+b.ph(slotNow))
		} else {
			w = append(w, s.LockedUntil+" IS NULL")
		}
	}
	if f == FormRowLock && s.LockedUntil != "" {
		// A claim that counts its attempts marks its rows in locked_until until they settle: a
		// marked row no claim holds lapsed (rowlock_rescue.go), and only the rescue takes it.
		if s.Lapsed {
			w = append(w, s.LockedUntil+" IS NOT NULL")
		} else {
			w = append(w, s.LockedUntil+" IS NULL")
		}
	}
	if len(w) == 0 {
		return "1 = 1"
	}
	return strings.Join(w, " AND ")
}

// order renders the ORDER BY of a look for ready rows: id, or group, id with GroupOrder (the
// same order: every row it reads has the queue's group).
func (s *Schema) order() string {
	if s.GroupOrder && s.Group != "" {
		return s.Group + ", " + s.ID
	}
	return s.ID
}

// returned renders the claimed columns: id, payload, attempt expression, headers.
func (s *Schema) returned(attempt string) string {
	return s.ID + ", " + s.Payload + ", " + attempt + ", " + s.orNull(s.Headers) + ", " + s.orNull(s.CreatedAt)
}

// orNull is col, or NULL for a column the table does not have.
func (s *Schema) orNull(col string) string {
	if col == "" {
		return "NULL"
	}
	return col
}

// UpdateReturningClaim is the lease claim of a dialect with UPDATE … RETURNING (PostgreSQL,
// SQLite): one statement stamps the token and attempt + 1 on up to Limit ready rows, oldest
// first, and returns them. lockSuffix follows the inner SELECT (" FOR UPDATE SKIP LOCKED" on
// PostgreSQL, "" on SQLite, whose claim transaction holds the database's write lock).
func UpdateReturningClaim(s *Schema, lockSuffix string) Claim {
	b := &binder{d: s.Dialect}
	set := s.LockedUntil + " = " + b.ph(slotToken)
	att := "1"
	if s.Attempt != "" {
		set += ", " + s.Attempt + " = " + s.Attempt + " + 1"
		att = s.Attempt
	}
	where := s.ready(FormLease, b)
	sql := "UPDATE " + s.QTable + " SET " + set + " WHERE " + s.ID + " IN (SELECT " + s.ID + " FROM " + s.ClaimFrom() +
		" WHERE " + where + " ORDER BY " + s.order() + " LIMIT " + b.ph(slotLimit) + lockSuffix + ") RETURNING " + s.returned(att)
	return &stmtClaim{sql: sql, b: b, sortByID: true}
}

// SelectClaim is the row-lock claim: it selects up to Limit ready rows, oldest first, with
// lockSuffix (" FOR UPDATE SKIP LOCKED"), reporting attempt + 1. It is also the claim of a
// custom dialect that needs only a SELECT. A non-empty lockSuffix must lock every row it
// returns until the claim's transaction ends, so that no other session changes or deletes
// one: the grouped settlement of such a claim that travels with its COMMIT (PipelinedTx) is
// then sent without a row-count check.
func SelectClaim(s *Schema, lockSuffix string) Claim {
	sql, b := selectReady(s, FormRowLock, lockSuffix)
	return &stmtClaim{sql: sql, b: b, locks: lockSuffix != ""}
}

// selectReady renders the select of up to Limit ready rows of form f, oldest first, reporting
// attempt + 1, with lockSuffix; the binder holds its arguments.
func selectReady(s *Schema, f Form, lockSuffix string) (string, *binder) {
	b := &binder{d: s.Dialect}
	att := "1"
	if s.Attempt != "" {
		att = s.Attempt + " + 1"
	}
	where := s.ready(f, b)
	return "SELECT " + s.returned(att) + " FROM " + s.ClaimFrom() + " WHERE " + where + " ORDER BY " + s.order() +
		" LIMIT " + b.ph(slotLimit) + lockSuffix, b
}

// SelectThenUpdateClaim is the lease claim of a dialect without UPDATE … RETURNING (MySQL,
// MariaDB): it selects up to Limit ready rows with lockSuffix (" FOR UPDATE SKIP LOCKED"),
// then stamps the token and attempt + 1 on them with one UPDATE, in the caller's transaction.
func SelectThenUpdateClaim(s *Schema, lockSuffix string) Claim {
	sel, b := selectReady(s, FormLease, lockSuffix)
	set := s.LockedUntil + " = " + s.Dialect.Placeholder(1)
	if s.Attempt != "" {
		set += ", " + s.Attempt + " = " + s.Attempt + " + 1"
	}
	return &selectUpdateClaim{sel: stmtClaim{sql: sel, b: b}, upd: newInList(s.Dialect,
		updateByIDs(s.Dialect, s.QTable)+" SET "+set+" WHERE "+s.ID+" IN (", ")", 2)}
}

type stmtClaim struct {
	sql      string
	b        *binder
	sortByID bool
	// locks: a row-lock claim whose every row is locked by the claim's transaction until it
	// ends (SelectClaim with a lock suffix), so no other session can change or delete it.
	locks   bool
	argPool sync.Pool
}

func (c *stmtClaim) Claim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	var args []any
	if a, ok := c.argPool.Get().(*[]any); ok {
		args = (*a)[:0]
	}
	args = c.b.bind(p, args)
	rows, err := tx.Query(ctx, c.sql, args...)
	clear(args)
	c.argPool.Put(&args)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst, err = scanClaimed(rows, dst, ownsBytes(c.b.d))
	if err != nil {
		return dst, err
	}
	if c.sortByID {
		sortByID(dst[start:])
	}
	return dst, nil
}

// step is the claim as one pipeline step: the rows it reads are appended to *dst.
func (c *stmtClaim) step(p ClaimParams, dst *[]Claimed) Step {
	return Step{SQL: c.sql, Args: c.b.bind(p, nil), Rows: func(rows Rows) error {
		start := len(*dst)
		got, err := scanClaimed(rows, *dst, ownsBytes(c.b.d))
		*dst = got
		if err == nil && c.sortByID {
			sortByID(got[start:])
		}
		return err
	}}
}

func sortByID(rows []Claimed) {
	slices.SortFunc(rows, func(a, b Claimed) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

func scanClaimed(rows Rows, dst []Claimed, owned bool) ([]Claimed, error) {
	return scanRows(rows, dst, true, owned)
}

// scanRows reads claimed rows: id, payload, attempt, headers and, with created, created_at (a
// custom EventClaim returns the first four only). With owned (the dialect's DriverOwnedBytes),
// a payload the driver hands over as []byte is kept as it is, not copied.
func scanRows(rows Rows, dst []Claimed, created, owned bool) ([]Claimed, error) {
	defer rows.Close()
	// Scan into the slice's own element and one attempt variable, through one argument list
	// for all rows: locals passed to Scan would escape, one allocation each per row, and so
	// would a list made per row.
	var att int64
	var destBuf [5]any
	dest := destBuf[:4]
	if created {
		dest = destBuf[:5]
	}
	for rows.Next() {
		dst = append(dst, Claimed{})
		c := &dst[len(dst)-1]
		dest[0], dest[1], dest[2], dest[3] = &c.ID, &c.Payload, &att, &c.Headers
		if owned {
			dest[1] = (*ownedBytes)(&c.Payload)
		}
		if created {
			dest[4] = (*timeScanner)(&c.CreatedAt)
		}
		if err := rows.Scan(dest...); err != nil {
			return dst[:len(dst)-1], err
		}
		c.Attempt = int(att)
	}
	if err := rows.Err(); err != nil {
		return dst, err
	}
	return dst, rows.Close()
}

type selectUpdateClaim struct {
	sel stmtClaim
	upd *inList
}

func (c *selectUpdateClaim) Claim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	start := len(dst)
	dst, err := c.sel.Claim(ctx, tx, p, dst)
	if err != nil || len(dst) == start {
		return dst, err
	}
	got := dst[start:]
	args := make([]any, 0, len(got)+1)
	args = append(args, c.sel.b.d.Time(p.Token))
	for _, r := range got {
		args = append(args, r.ID)
	}
	_, err = tx.Exec(ctx, c.upd.sql(len(got)), args...)
	return dst, err
}

// inList renders "prefix p, p, … suffix" statements for each list length once and keeps them.
type inList struct {
	d              Dialect
	prefix, suffix string
	first          int // number of the first list placeholder
	byCount
}

func newInList(d Dialect, prefix, suffix string, first int) *inList {
	return &inList{d: d, prefix: prefix, suffix: suffix, first: first}
}

func (l *inList) sql(n int) string {
	return l.get(n, func(n int) string {
		var sb strings.Builder
		sb.WriteString(l.prefix)
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(l.d.Placeholder(l.first + i))
		}
		sb.WriteString(l.suffix)
		return sb.String()
	})
}

// byCount keeps a statement rendered for each number of list items, built once.
type byCount struct {
	mu    sync.Mutex
	cache []string
}

// get returns the statement for n items, built by build the first time.
func (c *byCount) get(n int, build func(n int) string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < len(c.cache) && c.cache[n] != "" {
		return c.cache[n]
	}
	for len(c.cache) <= n {
		c.cache = append(c.cache, "")
	}
	c.cache[n] = build(n)
	return c.cache[n]
}

// ownedBytes scans a payload column of a dialect whose driver gives up every []byte it hands
// over (DriverOwnedBytes): such a value is kept as it is, and any other value is converted as
// database/sql's Scan into a *[]byte converts it (which copies a []byte too, since most
// drivers reuse theirs).
type ownedBytes []byte

func (b *ownedBytes) Scan(src any) error {
	if v, ok := src.([]byte); ok {
		*b = v
		return nil
	}
	var n sql.Null[[]byte]
	if err := n.Scan(src); err != nil {
		return err
	}
	*b = n.V
	return nil
}
