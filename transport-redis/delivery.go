package redisq

import (
	"maps"
	"strconv"
	"time"

	"github.com/settlehq/settle/core"
)

// BodyField is the stream entry field that holds a message's payload. Every other field of the
// entry is a header, except the three below, which settle writes and reads itself.
const BodyField = "body"

// Entry fields that carry what core's publish options give a message; they are not headers.
const (
	// IDField is the message's id (core.MessageID, or the id of its first entry): it stays the
	// message's Delivery.ID() across retries, delays and its dead letter, whose entries are new.
	IDField = "settle-id"
	// CorrelationField is the core.CorrelationID a message was published with.
	CorrelationField = "settle-correlation-id"
	// OrderingKeyField is the core.OrderingKey a message was published with.
	OrderingKeyField = "settle-ordering-key"
	// DedupField is the core.DedupKey a message was published with; the key is held for it in
	// the stream's dedup index until it is acknowledged, dropped or dead-lettered.
	DedupField = "settle-dedup-key"
	// EnqueuedField is, on a copy (a retry, a delay, a dead letter), when the message was first
	// added: unix milliseconds, the time of its first entry's id.
	EnqueuedField = "settle-enqueued-at"
)

// Delivery is one stream entry as a subscription claimed it. A handler reaches it with a type
// assertion on core.Message.Delivery() for what core.Delivery does not say.
type Delivery struct {
	entry   string // the stream entry id
	id      string // the message id: IDField, else the entry id
	corrID  string
	key     string
	dedup   string
	at      int64 // unix milliseconds of the message's first entry (EnqueuedAt)
	body    []byte
	headers map[string]string
	count   int // the pending list's delivery count at the claim: the fencing token
	attempt int
	claimed bool // taken by XAUTOCLAIM: an earlier delivery ended without a settlement
	src     *source

	// The lease list of the source: deliveries read and not yet settled, extended while held.
	// Guarded by the source's lease mutex.
	prev, next *Delivery
	listed     bool
}

var (
	_ core.Delivery        = (*Delivery)(nil)
	_ core.Suspect         = (*Delivery)(nil)
	_ core.Keyed           = (*Delivery)(nil)
	_ core.Correlated      = (*Delivery)(nil)
	_ core.Enqueued        = (*Delivery)(nil)
	_ core.MessagingSystem = (*Delivery)(nil)
)

// EnqueuedAt is when the message was first added to a stream: the time of its first entry's id
// (copies carry it in EnqueuedField).
func (d *Delivery) EnqueuedAt() (time.Time, bool) { return time.UnixMilli(d.at), d.at > 0 }

// MessagingSystem is "redis", as OpenTelemetry's messaging.system spells it.
func (d *Delivery) MessagingSystem() string { return "redis" }

// ID is the message's id: the core.MessageID it was published with, otherwise the id of the
// stream entry it was first added as ("1733312345678-0"). Copies (a retry, a delay, a dead
// letter) carry it in their IDField.
func (d *Delivery) ID() string { return d.id }

// EntryID is the id of the stream entry this delivery is.
func (d *Delivery) EntryID() string { return d.entry }

// CorrelationID is the core.CorrelationID the message was published with, "" when none.
func (d *Delivery) CorrelationID() string { return d.corrID }

// OrderingKey is the core.OrderingKey the message was published with, "" when none.
func (d *Delivery) OrderingKey() string { return d.key }

// Attempt is the number of this delivery: the attempts spent on earlier entries of the message
// (settle-retry-count, written on the copy a retry or a delay adds) plus the pending list's
// delivery count of this entry (1 when first read, raised by every claim after a lease ran out).
func (d *Delivery) Attempt() int { return d.attempt }

// Body is the entry's "body" field; nil when it has none.
func (d *Delivery) Body() []byte { return d.body }

// Headers returns the entry's other fields, nil when it has none. The map is the caller's.
func (d *Delivery) Headers() map[string]string {
	if d.headers == nil {
		return nil
	}
	return maps.Clone(d.headers)
}

// DeliveryCount is the pending list's delivery count of the entry at this claim.
func (d *Delivery) DeliveryCount() int { return d.count }

// Suspect reports whether the entry was taken back from an earlier delivery that never settled
// it (its lease ran out, or it was given back at shutdown): core runs it alone.
func (d *Delivery) Suspect() bool { return d.claimed }

// newDelivery builds a delivery from an entry's fields, as go-redis or a script returned them.
func newDelivery(src *source, entry string, fields []string, count int, claimed bool) *Delivery {
	d := &Delivery{entry: entry, id: entry, count: count, claimed: claimed, src: src}
	base := 0
	for i := 0; i+1 < len(fields); i += 2 {
		name, value := fields[i], fields[i+1]
		switch name {
		case BodyField:
			d.body = []byte(value)
			continue
		case IDField:
			d.id = value
			continue
		case CorrelationField:
			d.corrID = value
			continue
		case OrderingKeyField:
			d.key = value
			continue
		case DedupField:
			d.dedup = value
			continue
		case EnqueuedField:
			d.at, _ = strconv.ParseInt(value, 10, 64)
			continue
		}
		if d.headers == nil {
			d.headers = make(map[string]string, len(fields)/2)
		}
		d.headers[name] = value
		if name == core.HeaderRetryCount {
			n, err := core.ParseCount(value)
			if err != nil {
				src.log.Warn("redis: malformed attempt count on a stream entry; read as "+itoa(n),
					"stream", src.cfg.stream, "message_id", entry, "error", err)
			}
			base = n
		}
	}
	if d.at == 0 {
		d.at, _ = entryTime(entry)
	}
	d.attempt = min(base+count, core.MaxCount)
	return d
}
