package driver

import (
	"context"
	"database/sql"
	"slices"
	"sync"

	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// This file is the claims the engine renders for a dialect (a LeaseDialect or RowLockDialect
// returns one of them, or a Claim of its own), and ScanClaimed, which reads claimed rows.

// UpdateReturningClaim is the lease claim of a dialect with UPDATE … RETURNING (PostgreSQL,
// SQLite): one statement stamps the token and attempt + 1 on up to Limit ready rows, oldest
// first, and returns them. lockSuffix follows the inner SELECT (" FOR UPDATE SKIP LOCKED" on
// PostgreSQL, "" on SQLite, whose claim transaction holds the database's write lock).
func UpdateReturningClaim(s *Schema, lockSuffix string) Claim {
	b := NewBinder(s.Dialect)
	set := s.LockedUntil + " = " + b.Next(ArgToken)
	att := "1"
	if s.Attempt != "" {
		set += ", " + s.Attempt + " = " + s.Attempt + " + 1"
		att = s.Attempt
	}
	where := s.Ready(FormLease, b)
	sql := "UPDATE " + s.QTable + " SET " + set + " WHERE " + s.ID + " IN (SELECT " + s.ID + " FROM " + s.ClaimFrom() +
		" WHERE " + where + " ORDER BY " + s.Order() + " LIMIT " + b.Next(ArgLimit) + lockSuffix + ") RETURNING " + s.Returned(att)
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
func selectReady(s *Schema, f Form, lockSuffix string) (string, *Binder) {
	b := NewBinder(s.Dialect)
	att := "1"
	if s.Attempt != "" {
		att = s.Attempt + " + 1"
	}
	where := s.Ready(f, b)
	return "SELECT " + s.Returned(att) + " FROM " + s.ClaimFrom() + " WHERE " + where + " ORDER BY " + s.Order() +
		" LIMIT " + b.Next(ArgLimit) + lockSuffix, b
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
	return &selectUpdateClaim{sel: stmtClaim{sql: sel, b: b}, upd: sqltext.NewInList(s.Dialect.Placeholder,
		UpdateStart(s.Dialect, s.QTable)+" SET "+set+" WHERE "+s.ID+" IN (", ")", 2)}
}

// StepClaim is an optional interface of a Claim that is one statement: the lease form then
// sends it as the last step of a pipeline (Pipeliner) behind the settlements of the deliveries
// that finished before it, one round trip and one commit for both. The claims of
// UpdateReturningClaim and SelectClaim are StepClaims.
type StepClaim interface {
	Claim
	// ClaimStep returns the claim of p as one step; the rows it reads are appended to *dst.
	ClaimStep(p ClaimParams, dst *[]Claimed) Step
}

// LockingClaim is an optional interface of a row-lock Claim whose every row stays locked by the
// claim's transaction until it ends, so that no other session can change or delete one. The
// grouped settlement of such a claim that travels with its COMMIT (PipelinedTx) is then sent
// without a row-count check. SelectClaim with a lock suffix is one.
type LockingClaim interface {
	Claim
	// LocksClaimedRows reports whether every claimed row stays locked until the claim's
	// transaction ends.
	LocksClaimedRows() bool
}

type stmtClaim struct {
	sql      string
	b        *Binder
	sortByID bool
	// locks: a row-lock claim whose every row is locked by the claim's transaction until it
	// ends (SelectClaim with a lock suffix), so no other session can change or delete it.
	locks   bool
	argPool sync.Pool
}

var (
	_ StepClaim    = (*stmtClaim)(nil)
	_ LockingClaim = (*stmtClaim)(nil)
)

func (c *stmtClaim) Claim(ctx context.Context, tx Queryer, p ClaimParams, dst []Claimed) ([]Claimed, error) {
	var args []any
	if a, ok := c.argPool.Get().(*[]any); ok {
		args = (*a)[:0]
	}
	args = c.b.Bind(p, args)
	rows, err := tx.Query(ctx, c.sql, args...)
	clear(args)
	c.argPool.Put(&args)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst, err = ScanClaimed(c.b.d, rows, dst, true)
	if err != nil {
		return dst, err
	}
	if c.sortByID {
		sortByID(dst[start:])
	}
	return dst, nil
}

// ClaimStep is the claim as one pipeline step: the rows it reads are appended to *dst.
func (c *stmtClaim) ClaimStep(p ClaimParams, dst *[]Claimed) Step {
	return Step{SQL: c.sql, Args: c.b.Bind(p, nil), Rows: func(rows Rows) error {
		start := len(*dst)
		got, err := ScanClaimed(c.b.d, rows, *dst, true)
		*dst = got
		if err == nil && c.sortByID {
			sortByID(got[start:])
		}
		return err
	}}
}

// LocksClaimedRows reports whether the claim locks every row it returns (LockingClaim).
func (c *stmtClaim) LocksClaimedRows() bool { return c.locks }

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

// ScanClaimed reads the rows of a claim, in the columns Schema.Returned lists (id, payload,
// attempt, headers and, with created, created_at; a custom claim event returns the first four
// only), appends them to dst and closes rows. Where d declares DriverOwnedBytes, a payload the
// driver hands over as []byte is kept as it is, not copied.
func ScanClaimed(d Dialect, rows Rows, dst []Claimed, created bool) ([]Claimed, error) {
	owned := ownsBytes(d)
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
			dest[4] = (*sqltime.Scanner)(&c.CreatedAt)
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
	upd *sqltext.InList
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
	_, err = tx.Exec(ctx, c.upd.SQL(len(got)), args...)
	return dst, err
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
