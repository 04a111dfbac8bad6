package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Delivery is what every form's delivery carries: one claimed row. A form's delivery embeds it
// and adds how the row is held (a lease token, a claim's transaction, a key on a connection).
// Deliveries of one claim live in one slab.
type Delivery struct {
	rt      *Runtime
	id      int64
	idStr   string // id in decimal, set when the delivery is built (read concurrently)
	attempt int
	payload []byte
	headers []byte
	// createdAt is the row's created_at (zero without one): core.Enqueued.
	createdAt time.Time
	suspect   bool       // taken after its previous claim lapsed without a settlement
	hctx      *HandlerTx // transactional mode: set by HandlerContext
}

// Init makes d the delivery of row c, whose id reads idStr in decimal.
func (d *Delivery) Init(rt *Runtime, c driver.Claimed, idStr string) {
	*d = Delivery{rt: rt, id: c.ID, idStr: idStr, attempt: c.Attempt, payload: c.Payload, headers: c.Headers, createdAt: c.CreatedAt}
}

// IDText writes the ids of rows in decimal into one string (one allocation per claim rather
// than one per row) and returns it with the end of each id in it, appended to ends.
func IDText(rows []driver.Claimed, ends []int32) (string, []int32) {
	if len(rows) == 0 {
		return "", ends
	}
	var num [20]byte
	width := max(len(strconv.AppendInt(num[:0], rows[0].ID, 10)), len(strconv.AppendInt(num[:0], rows[len(rows)-1].ID, 10)))
	var sb strings.Builder
	sb.Grow(len(rows) * width)
	for _, r := range rows {
		sb.Write(strconv.AppendInt(num[:0], r.ID, 10))
		ends = append(ends, int32(sb.Len()))
	}
	return sb.String(), ends
}

// Runtime is the subscription the delivery belongs to.
func (d *Delivery) Runtime() *Runtime { return d.rt }

// RowID is the row's id.
func (d *Delivery) RowID() int64 { return d.id }

// rowID makes the deliveries of every form recognisable to RowID.
func (d *Delivery) rowID() int64 { return d.id }

// ID is the row id in decimal.
func (d *Delivery) ID() string { return d.idStr }

// Attempt is the delivery's attempt, 1 on the first.
func (d *Delivery) Attempt() int { return d.attempt }

// Body is the payload column.
func (d *Delivery) Body() []byte { return d.payload }

// Suspect reports whether the row's previous claim lapsed without a settlement: its process
// may have died in its handler. Core runs it with no other handler of the subscription.
func (d *Delivery) Suspect() bool { return d.suspect }

// SetSuspect marks the delivery of a row taken after its previous claim lapsed.
func (d *Delivery) SetSuspect(s bool) { d.suspect = s }

// HeadersError is the header a delivery reports when its headers column is not a JSON object
// of strings.
const HeadersError = "settle-headers-error"

// Headers decodes the headers column (a JSON object of strings). A column that does not hold
// one (written by hand, say) reads as the single header HeadersError with the decoding error,
// so the handler can see it instead of losing it.
func (d *Delivery) Headers() map[string]string {
	if len(d.headers) == 0 || string(d.headers) == "null" {
		return nil
	}
	var h map[string]string
	if err := json.Unmarshal(d.headers, &h); err != nil {
		return map[string]string{HeadersError: err.Error()}
	}
	return h
}

// EnqueuedAt is the row's created_at (core.Enqueued): a retried row keeps it. A table without
// the column reports false.
func (d *Delivery) EnqueuedAt() (time.Time, bool) { return d.createdAt, !d.createdAt.IsZero() }

// MessagingSystem names the database as OpenTelemetry's messaging.system (core.MessagingSystem),
// from the family of SQL its dialect declares (driver.FamilyOf): postgresql, mysql (MySQL and
// MariaDB), sqlite, the family's own name, or "unknown" for a dialect that declares none.
func (d *Delivery) MessagingSystem() string { return SystemName(driver.FamilyOf(d.rt.D)) }

// SystemName is messaging.system of a family of SQL.
func SystemName(f driver.Family) string {
	switch f {
	case driver.FamilyPostgres:
		return "postgresql"
	case driver.FamilyMySQL, driver.FamilyMariaDB:
		return "mysql"
	case "":
		return "unknown"
	}
	return string(f)
}

// RowID returns the row id of a queue-table delivery, and false for a delivery of another
// backend.
func RowID(d core.Delivery) (int64, bool) {
	if x, ok := d.(interface{ rowID() int64 }); ok {
		return x.rowID(), true
	}
	return 0, false
}

var (
	_ core.Delivery        = (*Delivery)(nil)
	_ core.Enqueued        = (*Delivery)(nil)
	_ core.MessagingSystem = (*Delivery)(nil)
)
