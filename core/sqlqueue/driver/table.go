package driver

import (
	"fmt"
	"strings"
)

// Table describes a queue table: its name and the names of its columns. ID and Payload are
// required and default to "id" and "payload"; every other column is absent unless named.
// StandardTable names them all with their default names; set a field to "" to leave a column
// out, or to another name to rename it.
//
// A table with a Group column holds many queues (one per group value) and its dead letter is
// a group; without one, a table is one queue and its dead letter is another table with the
// same columns.
type Table struct {
	// Schema optionally qualifies Name (a PostgreSQL schema, a MySQL database, an attached
	// SQLite database).
	Schema string
	// Name is the table's name.
	Name string
	// Columns names the table's columns.
	Columns Columns
}

// Columns names a queue table's columns; "" leaves an optional column out.
//
// At start the engine reads the table's columns from the catalogue (Dialect.Columns) and
// refuses, naming table and column, one that is missing or whose kind cannot hold what the
// engine writes. The kinds each column accepts:
//
//	column                      kinds accepted
//	id, attempt                 KindInteger
//	payload                     KindBytes, KindText, KindJSON
//	grp                         KindText
//	headers                     KindJSON, KindText, KindBytes
//	last_error                  KindText
//	retry_after, locked_until,  KindTime; also KindText where the dialect stores times as text
//	processed_at, created_at    (Dialect.Time returns a string: SQLite), and KindInteger where
//	                            it stores them as numbers (Dialect.Time returns an integer)
//
// A column of KindUnknown (a type the dialect does not classify) is accepted anywhere;
// KindBool, KindFloat and KindOther nowhere.
type Columns struct {
	// ID is the ordered integer primary key (default "id").
	ID string
	// Payload holds the message bytes (default "payload").
	Payload string
	// Group names the row's queue; with it one table holds many queues.
	Group string
	// Attempt counts deliveries; a DeadLetterAfter cap needs it.
	Attempt string
	// RetryAfter holds a row back until a time; without it RetryAfter(d) acts as Retry().
	RetryAfter string
	// LockedUntil is the lease (and its token); the lease form needs it.
	LockedUntil string
	// ProcessedAt marks a finished row instead of deleting it.
	ProcessedAt string
	// Headers holds a JSON object of string headers.
	Headers string
	// CreatedAt records when the row was published.
	CreatedAt string
	// LastError records why the row's last attempt failed (core.Reason of the outcome: the
	// handler's cause or error text, at most core.MaxReasonBytes): written by every retry,
	// retry after a delay and dead letter, and by a settlement that failed, so a row waiting
	// for its next attempt says why, and so does a dead letter. Acks and drops leave it as it
	// was. A text column.
	LastError string
}

// StandardTable returns a Table named name with every column under its default name: id,
// payload, grp, attempt, retry_after, locked_until, processed_at, headers, created_at. With
// processed_at present, ack and drop mark rows instead of deleting them; leave it out (set it
// to "") to delete. The last_error column is not among them, so that tables created before it
// existed keep passing the start-up check: name it (Columns.LastError = "last_error") to
// record why each failed attempt failed; the dialects' DDL helpers create it when named.
func StandardTable(name string) Table {
	return Table{Name: name, Columns: Columns{
		ID: "id", Payload: "payload", Group: "grp", Attempt: "attempt", RetryAfter: "retry_after",
		LockedUntil: "locked_until", ProcessedAt: "processed_at", Headers: "headers", CreatedAt: "created_at",
	}}
}

// Ref returns the table's reference.
func (t Table) Ref() TableRef { return TableRef{Schema: t.Schema, Name: t.Name} }

// withDefaults fills the required columns' default names.
func (t Table) withDefaults() Table {
	if t.Columns.ID == "" {
		t.Columns.ID = "id"
	}
	if t.Columns.Payload == "" {
		t.Columns.Payload = "payload"
	}
	return t
}

// Column is one column of a Table's description: its role (the field's default name, "id",
// "locked_until", …, used in messages), its name ("" when the table leaves it out), and the
// kinds of column type that can hold what the engine writes into it.
type Column struct {
	Role  string
	Name  string
	Kinds []ColumnKind // nil: a time column, whose kinds depend on the dialect (TimeKinds)
}

// ColumnList returns every column of t's description, in the order of Columns.
func (t Table) ColumnList() []Column {
	c := t.Columns
	return []Column{
		{"id", c.ID, []ColumnKind{KindInteger}},
		{"payload", c.Payload, []ColumnKind{KindBytes, KindText, KindJSON}},
		{"grp", c.Group, []ColumnKind{KindText}},
		{"attempt", c.Attempt, []ColumnKind{KindInteger}},
		{"retry_after", c.RetryAfter, nil},
		{"locked_until", c.LockedUntil, nil},
		{"processed_at", c.ProcessedAt, nil},
		{"headers", c.Headers, []ColumnKind{KindJSON, KindText, KindBytes}},
		{"created_at", c.CreatedAt, nil},
		{"last_error", c.LastError, []ColumnKind{KindText}},
	}
}

// ValidIdent reports whether s may be used as an identifier: a letter or _, then letters,
// digits, _ or $. Every table and column name is checked with it before the dialect quotes it;
// how long a name may be is the dialect's to say (IdentifierLimit, checked by NewSchema).
func ValidIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && ((r >= '0' && r <= '9') || r == '$'):
		default:
			return false
		}
	}
	return true
}

// Validate checks every identifier of t and returns an error naming the first bad one.
func (t Table) Validate() error {
	t = t.withDefaults()
	if t.Schema != "" && !ValidIdent(t.Schema) {
		return fmt.Errorf("sqlqueue: table %q: invalid schema name %q (letters, digits, _ and $, starting with a letter or _)", t.Name, t.Schema)
	}
	if !ValidIdent(t.Name) {
		return fmt.Errorf("sqlqueue: invalid table name %q (letters, digits, _ and $, starting with a letter or _)", t.Name)
	}
	seen := map[string]string{}
	for _, c := range t.ColumnList() {
		if c.Name == "" {
			continue
		}
		if !ValidIdent(c.Name) {
			return fmt.Errorf("sqlqueue: table %s: invalid name %q for the %s column", t.Ref(), c.Name, c.Role)
		}
		if other, ok := seen[strings.ToLower(c.Name)]; ok {
			return fmt.Errorf("sqlqueue: table %s: column %q is named for both %s and %s", t.Ref(), c.Name, other, c.Role)
		}
		seen[strings.ToLower(c.Name)] = c.Role
	}
	return nil
}

// checkLengths refuses a name of t longer than d's IdentifierLimit.
func checkLengths(d Dialect, t Table) error {
	if t.Schema != "" {
		if err := CheckIdentifier(d, "schema name", t.Schema); err != nil {
			return fmt.Errorf("%w (table %s)", err, t.Ref())
		}
	}
	if err := CheckIdentifier(d, "table name", t.Name); err != nil {
		return err
	}
	for _, c := range t.ColumnList() {
		if c.Name == "" {
			continue
		}
		if err := CheckIdentifier(d, "name of the "+c.Role+" column", c.Name); err != nil {
			return fmt.Errorf("%w (table %s)", err, t.Ref())
		}
	}
	return nil
}

// ParseTableRef reads "name" or "schema.name" (a dead-letter table destination) and validates it.
// Both parts of a dotted name must be valid identifiers: ".jobs" and "jobs." are refused, not
// read as an unqualified name.
func ParseTableRef(s string) (TableRef, error) {
	var r TableRef
	schema, name, dotted := strings.Cut(s, ".")
	if dotted {
		r = TableRef{Schema: schema, Name: name}
	} else {
		r = TableRef{Name: s}
	}
	if (dotted && !ValidIdent(r.Schema)) || !ValidIdent(r.Name) {
		return TableRef{}, fmt.Errorf("sqlqueue: %q is not a valid table name (name or schema.name; letters, digits, _ and $)", s)
	}
	return r, nil
}

// TableRef names a table: an optional schema and a name.
type TableRef struct {
	Schema, Name string
}

func (t TableRef) String() string {
	if t.Schema != "" {
		return t.Schema + "." + t.Name
	}
	return t.Name
}

// QueueRef names a queue: a table and, in a table with a group column, a group.
type QueueRef struct {
	Table TableRef
	Group string
}
