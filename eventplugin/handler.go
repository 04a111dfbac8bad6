package eventplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin/internal/wire"
)

// Handler is the Go interface of an event plugin. A plugin author implements it and passes it
// to Serve; on the host, the value Load returns implements it over gRPC (and checks what comes
// back). Handler never touches the database: it returns statements, and settle runs them,
// bound, where the dialect's own statement would have run.
type Handler interface {
	// Describe names the plugin and declares the events it renders, per dialect. The host
	// calls it once after every start of the plugin process.
	Describe(ctx context.Context) (Manifest, error)
	// Render returns the statements of r.Event for one delivery (or one claim). Arguments go
	// in Statement.Args, never into the SQL text. An error fails the event as a failed
	// statement would.
	Render(ctx context.Context, r *Request) ([]Statement, error)
}

// Manifest is what a plugin declares about itself.
type Manifest struct {
	// Name names the plugin in logs and errors.
	Name string
	// Handles lists the events the plugin renders.
	Handles []Handles
}

// Handles declares one event and the dialects it is rendered for.
type Handles struct {
	Event Event
	// Dialects are families of SQL as dialects declare them (sqlqueue.FamilyOf: "sqlite",
	// "postgres", "mysql", "mariadb", or a family a dialect of another database declares);
	// empty means every dialect, including one that declares no family.
	Dialects []string
}

// Declares reports whether m declares event e for dialect.
func (m Manifest) Declares(e Event, dialect string) bool {
	for _, h := range m.Handles {
		if h.Event == e && (len(h.Dialects) == 0 || slices.Contains(h.Dialects, dialect)) {
			return true
		}
	}
	return false
}

// validate checks what a plugin declared.
func (m Manifest) validate() error {
	if m.Name == "" {
		return errors.New("the manifest has no name")
	}
	for _, h := range m.Handles {
		if !h.Event.Valid() {
			return fmt.Errorf("the manifest declares an unknown event %v", h.Event)
		}
		for _, d := range h.Dialects {
			if d == "" {
				return fmt.Errorf("the manifest declares event %v for an empty dialect name", h.Event)
			}
		}
	}
	return nil
}

// Placeholders is how a dialect spells bound parameters.
type Placeholders uint8

const (
	// PlaceholdersQuestion spells every parameter "?" (SQLite, MySQL, MariaDB).
	PlaceholdersQuestion Placeholders = iota + 1
	// PlaceholdersDollar spells the n-th parameter "$n" (PostgreSQL).
	PlaceholdersDollar
)

// Request is one event for a plugin to render.
type Request struct {
	// Event is the event to render.
	Event Event
	// Dialect is the family of SQL the dialect declares ("sqlite", "postgres", "mysql", "mariadb";
	// sqlqueue.FamilyOf), which the plugin writes its SQL for; "" when it declares none.
	Dialect string
	// Form is the subscription's claim form: where the statements will run.
	Form sqlqueue.Form
	// Placeholders is how the dialect spells parameters; Placeholder spells one.
	Placeholders Placeholders
	// Table is the queue table.
	Table Table
	// Subscription and Queue name the subscription, for the plugin's own logs.
	Subscription, Queue string
	// Now is the host's clock at the event.
	Now time.Time
	// Row is the delivery being settled (every event but claim).
	Row Row
	// Claim holds the parameters of a claim (claim only).
	Claim Claim
	// Delay is the delay of a retry_after, and RetryAt is Now + Delay.
	Delay   time.Duration
	RetryAt time.Time
	// Dest is the dead letter of a dead_letter event.
	Dest Destination

	// wireTable is Table on the wire, built once per subscription by Plugin.Events.
	wireTable *wire.Table
}

// Placeholder spells the n-th (1-based) parameter of a statement. "?" parameters bind the
// arguments in the order the markers appear in the text, "$n" binds the n-th argument: number
// the parameters in text order and one argument list serves every dialect.
func (r *Request) Placeholder(n int) string {
	if r.Placeholders == PlaceholdersDollar {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Table is the queue table: as configured, and quoted by the dialect, ready to splice.
type Table struct {
	// Table is the description the subscription was configured with (defaults filled in).
	sqlqueue.Table
	// QuotedName is the quoted, possibly schema-qualified table name.
	QuotedName string
	// Quoted holds the quoted column names; "" for absent columns.
	Quoted sqlqueue.Columns
}

// Row identifies the delivery being settled.
type Row struct {
	ID int64
	// Attempt is the delivery's attempt, 1 on the first.
	Attempt int
	// Group is the row's group in a table with a group column.
	Group string
	// Token is the lease the claim stamped into locked_until (lease form only; zero otherwise).
	Token time.Time
}

// Claim holds the parameters of a claim.
type Claim struct {
	// Limit is the most rows to claim.
	Limit int
	// Group is the queue's group in a table with a group column.
	Group string
	// Token is the lease to stamp into locked_until (lease form only).
	Token time.Time
}

// Destination is where a dead_letter event moves the row.
type Destination struct {
	// Name is the destination as configured: a group, or a table name.
	Name string
	// IsGroup reports a group of the same table (tables with a group column).
	IsGroup bool
	// QuotedTable is the quoted dead-letter table when IsGroup is false.
	QuotedTable string
}

// Statement is SQL text and the arguments bound to its placeholders, in order.
//
// An argument is nil (NULL), an integer, a float, a string, a []byte, a bool or a time.Time;
// a time.Time is stored as the dialect stores the queue's own timestamps, so a plugin can
// compare it with retry_after or locked_until.
//
// For a claim the last statement is a query returning, per claimed row and in this order,
// the id, the payload, the attempt of the delivery (1 on the first) and the headers (or NULL).
type Statement struct {
	SQL  string
	Args []any
}
