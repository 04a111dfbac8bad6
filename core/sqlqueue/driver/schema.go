package driver

import "strings"

// Schema is a validated Table spelled by a dialect: quoted names ready to splice into
// statements. The engine builds one per subscription; dialects receive it to render their
// claims. Quoted column fields are "" for absent columns.
type Schema struct {
	// Dialect spells the statements.
	Dialect Dialect
	// Table is the validated description.
	Table Table
	// QTable is the quoted, possibly schema-qualified table name.
	QTable string
	// Quoted column names; "" when the column is absent.
	ID, Payload, Group, Attempt, RetryAfter, LockedUntil, ProcessedAt, Headers, CreatedAt, LastError string
	// ClaimHint follows QTable in the claims' locking SELECTs (" FORCE INDEX (…)"): the engine
	// sets it from a ClaimIndex dialect when a subscription starts, so that every claim of the
	// table reaches its rows through one index. "" for other dialects.
	ClaimHint string
	// GroupOrder is set by the engine, when a subscription starts, for a GroupOrder dialect
	// whose table has an index on (group, id): the statements that look for ready rows then
	// compare the group as a range of one value and order by group, id (see GroupOrder). A
	// LeaseClaim or RowLockClaim rendered with the engine's claim helpers follows it; a dialect
	// that spells its own claim may ignore it.
	GroupOrder bool
	// Lapsed is set on the schema of a rescue claim: a ready row is then one whose claim
	// lapsed without a settlement (lease form: locked_until set and past; row lock: the mark a
	// counted claim set), where otherwise it is one no claim holds or marks (locked_until
	// NULL). A LeaseClaim that renders its condition with the engine's claim helpers
	// (UpdateReturningClaim, SelectThenUpdateClaim) follows it; a dialect that spells its own
	// must too (it is called once with Lapsed, for the rescue).
	Lapsed bool
}

// ClaimFrom is the table as the claims' locking SELECTs name it: QTable and ClaimHint. A
// dialect that spells its own claim puts it after FROM.
func (s *Schema) ClaimFrom() string { return s.QTable + s.ClaimHint }

// NewSchema validates t and quotes its names with d.
func NewSchema(d Dialect, t Table) (*Schema, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	t = t.withDefaults()
	if err := checkLengths(d, t); err != nil {
		return nil, err
	}
	q := func(s string) string {
		if s == "" {
			return ""
		}
		return d.Quote(s)
	}
	c := t.Columns
	return &Schema{
		Dialect: d, Table: t, QTable: QuoteRef(d, t.Ref()),
		ID: q(c.ID), Payload: q(c.Payload), Group: q(c.Group), Attempt: q(c.Attempt),
		RetryAfter: q(c.RetryAfter), LockedUntil: q(c.LockedUntil), ProcessedAt: q(c.ProcessedAt),
		Headers: q(c.Headers), CreatedAt: q(c.CreatedAt), LastError: q(c.LastError),
	}, nil
}

// ColumnTypes are one dialect's SQL types (with constraints and defaults) for the columns of a
// queue table, for its CREATE TABLE. LastError is a text type (PostgreSQL TEXT, MySQL TEXT,
// SQLite TEXT); a dialect that leaves it "" gets TEXT.
type ColumnTypes struct {
	ID, Payload, Group, Attempt, RetryAfter, LockedUntil, ProcessedAt, Headers, CreatedAt, LastError string
}

// ColumnDefs returns "<quoted column> <type>" for every column the table has, in the order of
// Columns: the column list of a dialect's CREATE TABLE.
func (s *Schema) ColumnDefs(t ColumnTypes) []string {
	if t.LastError == "" {
		t.LastError = "TEXT"
	}
	var defs []string
	for _, c := range [][2]string{
		{s.ID, t.ID}, {s.Payload, t.Payload}, {s.Group, t.Group}, {s.Attempt, t.Attempt},
		{s.RetryAfter, t.RetryAfter}, {s.LockedUntil, t.LockedUntil}, {s.ProcessedAt, t.ProcessedAt},
		{s.Headers, t.Headers}, {s.CreatedAt, t.CreatedAt}, {s.LastError, t.LastError},
	} {
		if c[0] != "" {
			defs = append(defs, c[0]+" "+c[1])
		}
	}
	return defs
}

// QuoteRef quotes a table reference with d: its schema, if any, and its name.
func QuoteRef(d Dialect, r TableRef) string {
	if r.Schema != "" {
		return d.Quote(r.Schema) + "." + d.Quote(r.Name)
	}
	return d.Quote(r.Name)
}

// Ready renders the condition of a row that a claim of form f may take, binding its values with
// b: in the queue's group (compared as a range of one value with GroupOrder), not processed, not
// delayed, and not held (lease form: no lease, or with Lapsed a lease that ran out; row-lock
// form: no mark of a counted claim, or with Lapsed one), as far as the table has the columns.
// The engine's claim helpers render their claims with it; a dialect that spells its own claim
// may too.
func (s *Schema) Ready(f Form, b *Binder) string {
	var w []string
	if s.Group != "" {
		if s.GroupOrder {
			w = append(w, s.Group+" >= "+b.Next(ArgGroup)+" AND "+s.Group+" <= "+b.Next(ArgGroup))
		} else {
			w = append(w, s.Group+" = "+b.Next(ArgGroup))
		}
	}
	if s.ProcessedAt != "" {
		w = append(w, s.ProcessedAt+" IS NULL")
	}
	if s.RetryAfter != "" {
		w = append(w, "("+s.RetryAfter+" IS NULL OR "+s.RetryAfter+" <= "+b.Next(ArgNow)+")")
	}
	if f == FormLease && s.LockedUntil != "" {
		// A row whose lease ran out without a settlement (its process died, hung or lost its
		// connection) may be the one that killed it: only the rescue claim takes it, alone
		// (the lease form's rescue).
		if s.Lapsed {
			w = append(w, s.LockedUntil+" IS NOT NULL AND "+s.LockedUntil+" <= "+b.Next(ArgNow))
		} else {
			w = append(w, s.LockedUntil+" IS NULL")
		}
	}
	if f == FormRowLock && s.LockedUntil != "" {
		// A claim that counts its attempts marks its rows in locked_until until they settle: a
		// marked row no claim holds lapsed (the row-lock form's rescue), and only the rescue takes it.
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

// Order renders the ORDER BY of a look for ready rows: id, or group, id with GroupOrder (the
// same order: every row it reads has the queue's group).
func (s *Schema) Order() string {
	if s.GroupOrder && s.Group != "" {
		return s.Group + ", " + s.ID
	}
	return s.ID
}

// Returned renders the columns a claim returns: id, payload, the attempt expression attempt,
// headers and created_at (NULL for a column the table does not have), as ScanClaimed reads them.
func (s *Schema) Returned(attempt string) string {
	return s.ID + ", " + s.Payload + ", " + attempt + ", " + s.orNull(s.Headers) + ", " + s.orNull(s.CreatedAt)
}

// orNull is col, or NULL for a column the table does not have.
func (s *Schema) orNull(col string) string {
	if col == "" {
		return "NULL"
	}
	return col
}
