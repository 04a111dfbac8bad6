package outbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Table describes an outbox table the service owns. ID, Destination, Payload and PublishedAt are
// required; Headers, CreatedAt and ProcessedAt are optional. Without ProcessedAt a Receiver
// deletes a processed record instead of marking it.
type Table struct {
	// Schema optionally qualifies Name.
	Schema string
	// Name is the table's name.
	Name string
	// Columns names the table's columns.
	Columns Columns
}

// Columns names an outbox table's columns; "" leaves an optional column out.
type Columns struct {
	// ID is the ordered integer primary key (default "id"); receivers find records by it.
	ID string
	// Destination is where the record is published: a queue, a routing key (default "destination").
	Destination string
	// Payload holds the message bytes (default "payload").
	Payload string
	// Headers holds a JSON object of string headers.
	Headers string
	// CreatedAt records when the record was written.
	CreatedAt string
	// PublishedAt is the relay's own book (default "published_at"): when the transport
	// confirmed the record's publish; NULL while it is still to be published.
	PublishedAt string
	// ProcessedAt marks a record a Receiver on this database has finished (duplicate
	// suppression); without it a Receiver deletes such records.
	ProcessedAt string
}

// StandardTable returns a Table named name with every column under its default name: id,
// destination, payload, headers, created_at, published_at, processed_at.
func StandardTable(name string) Table {
	return Table{Name: name, Columns: Columns{
		ID: "id", Destination: "destination", Payload: "payload", Headers: "headers",
		CreatedAt: "created_at", PublishedAt: "published_at", ProcessedAt: "processed_at",
	}}
}

func (t Table) withDefaults() Table {
	c := &t.Columns
	for _, f := range []struct {
		p   *string
		def string
	}{{&c.ID, "id"}, {&c.Destination, "destination"}, {&c.Payload, "payload"}, {&c.PublishedAt, "published_at"}} {
		if *f.p == "" {
			*f.p = f.def
		}
	}
	return t
}

// Ref returns the table's reference.
func (t Table) Ref() sqlqueue.TableRef { return sqlqueue.TableRef{Schema: t.Schema, Name: t.Name} }

type column struct{ role, name string }

func (t Table) columns() []column {
	c := t.Columns
	return []column{
		{"id", c.ID}, {"destination", c.Destination}, {"payload", c.Payload},
		{"headers", c.Headers}, {"created_at", c.CreatedAt}, {"published_at", c.PublishedAt},
		{"processed_at", c.ProcessedAt},
	}
}

// Validate checks every identifier of t and returns an error naming the first bad one.
func (t Table) Validate() error {
	t = t.withDefaults()
	if t.Schema != "" && !sqlqueue.ValidIdent(t.Schema) {
		return fmt.Errorf("outbox: table %q: invalid schema name %q", t.Name, t.Schema)
	}
	if !sqlqueue.ValidIdent(t.Name) {
		return fmt.Errorf("outbox: invalid table name %q (letters, digits, _ and $, starting with a letter or _)", t.Name)
	}
	seen := map[string]string{}
	for _, c := range t.columns() {
		if c.name == "" {
			continue
		}
		if !sqlqueue.ValidIdent(c.name) {
			return fmt.Errorf("outbox: table %s: invalid name %q for the %s column", t.Ref(), c.name, c.role)
		}
		if other, dup := seen[strings.ToLower(c.name)]; dup {
			return fmt.Errorf("outbox: table %s: column %q is named for both %s and %s", t.Ref(), c.name, other, c.role)
		}
		seen[strings.ToLower(c.name)] = c.role
	}
	return nil
}

// check asks the catalogue that the table and every named column exist.
func (t Table) check(ctx context.Context, d sqlqueue.Dialect, q sqlqueue.Queryer) error {
	cols, err := d.Columns(ctx, q, t.Ref())
	if err != nil {
		return fmt.Errorf("outbox: reading the columns of table %s: %w", t.Ref(), err)
	}
	if len(cols) == 0 {
		return &sqlqueue.ColumnError{Table: t.Ref().String(), Reason: "no such table (the outbox table)"}
	}
	have := make(map[string]bool, len(cols))
	for _, c := range cols {
		have[strings.ToLower(c.Name)] = true
	}
	for _, c := range t.columns() {
		if c.name != "" && !have[strings.ToLower(c.name)] {
			reason := "no such column"
			if c.role == "published_at" {
				reason += " (the relay marks confirmed publishes in it; add a nullable timestamp column, see outbox.DDL)"
			}
			return &sqlqueue.ColumnError{Table: t.Ref().String(), Column: c.name, Role: c.role, Reason: reason}
		}
	}
	return nil
}

// DDL returns the CREATE TABLE statement of a standard outbox table, spelled with the column
// types the dialect declares (driver.DDLTypes; settle's SQLite, PostgreSQL and MySQL/MariaDB
// dialects do). For sqlite it is:
//
//	CREATE TABLE IF NOT EXISTS "outbox" (
//	  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
//	  "destination" TEXT NOT NULL,
//	  "payload" BLOB NOT NULL,
//	  "headers" TEXT,
//	  "created_at" TEXT NOT NULL,
//	  "published_at" TEXT,
//	  "processed_at" TEXT
//	)
func DDL(d sqlqueue.Dialect, name string) (string, error) {
	t := StandardTable(name)
	if err := t.Validate(); err != nil {
		return "", err
	}
	if err := driver.CheckIdentifier(d, "outbox table name", name); err != nil {
		return "", err
	}
	dt, ok := d.(driver.DDLTypes)
	if !ok {
		return "", fmt.Errorf("outbox: dialect %s declares no column types (driver.DDLTypes); create table %s yourself with the columns id (auto-increment primary key), destination (text), payload (bytes), headers (JSON or text), created_at, published_at and processed_at (times as the dialect stores them)", d.Name(), name)
	}
	ty := dt.DDLTypes()
	q := d.Quote
	return "CREATE TABLE IF NOT EXISTS " + q(name) + " (\n" +
		"  " + q("id") + " " + ty.ID + ",\n" +
		"  " + q("destination") + " " + ty.Text + " NOT NULL,\n" +
		"  " + q("payload") + " " + ty.Bytes + " NOT NULL,\n" +
		"  " + q("headers") + " " + ty.JSON + ",\n" +
		"  " + q("created_at") + " " + ty.Time + " NOT NULL,\n" +
		"  " + q("published_at") + " " + ty.Time + ",\n" +
		"  " + q("processed_at") + " " + ty.Time + "\n)" + ty.TableOptions, nil
}
