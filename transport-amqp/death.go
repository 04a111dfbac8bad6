package amqp

import (
	"errors"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// Death is one entry of the x-death header RabbitMQ writes on a message it dead-letters
// itself: a quorum queue at its delivery limit (reason "delivery_limit"), a waiting queue's
// expired copy going back to its queue ("expired"), a rejected message ("rejected"), a queue
// over its length limit ("maxlen"). Settle's own dead letters carry core.DeadLetterInfo's
// headers instead; a message the server moved is read back through these entries.
type Death struct {
	// Queue and Reason identify the entry: RabbitMQ keeps one per queue and reason.
	Queue, Reason string
	// Exchange and RoutingKeys are where the message had been published.
	Exchange    string
	RoutingKeys []string
	// Count is how many times the message died in Queue for Reason, within [0, core.MaxCount].
	Count int
	// Time is when it first died there (RabbitMQ keeps the first time).
	Time time.Time
}

// Deaths reads the x-death header of a delivery's headers, most recent entry first, as
// RabbitMQ orders it. Nil when there is none. Entries that are not tables are skipped, and
// counts that are not integers, negative or above core.MaxCount are read within
// [0, core.MaxCount]; err reports each such anomaly (errors.Join) while the entries are still
// returned.
func Deaths(h amqp091.Table) ([]Death, error) {
	v, ok := h["x-death"]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("x-death is a %T, not an array", v)
	}
	var out []Death
	var errs []error
	for i, e := range list {
		t, ok := e.(amqp091.Table)
		if !ok {
			errs = append(errs, fmt.Errorf("x-death entry %d is a %T, not a table", i, e))
			continue
		}
		d := Death{Queue: tableString(t["queue"]), Reason: tableString(t["reason"]), Exchange: tableString(t["exchange"])}
		if keys, ok := t["routing-keys"].([]any); ok {
			for _, k := range keys {
				d.RoutingKeys = append(d.RoutingKeys, tableString(k))
			}
		}
		if at, ok := t["time"].(time.Time); ok {
			d.Time = at
		}
		n, err := deliveryCount(amqp091.Table{"x-delivery-count": t["count"]})
		if _, present := t["count"]; !present {
			err = errors.New("no count")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("x-death entry %d (queue %q, reason %q): count: %w", i, d.Queue, d.Reason, err))
		}
		d.Count = n
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

func tableString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}
