package amqp

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// RetryCountHeader is the header in which settle counts the attempts a message has had before
// this copy: a decimal string, raised by one on every copy settle publishes (a retry on a
// classic queue with a cap, a delayed retry) and carrying the final count into the dead letter.
// It has no "x-" prefix: RabbitMQ reserves those.
const RetryCountHeader = core.HeaderRetryCount

// Delivery is one message from a classic queue. Handlers reach it with a type assertion on
// core.Message.Delivery(); a quorum queue's deliveries are *QuorumDelivery.
//
// Attempt is settle-retry-count + 1, plus one when RabbitMQ reports the delivery as redelivered
// and this process handed the message out before (it requeued it, or its channel closed under
// a handler). A classic queue reports only that flag, not how often, and sets it on every
// message a node recovers after an unclean stop too, so a flag settle cannot trace to its own
// delivery counts nothing (see the package doc, Attempts), and repeated returns count once.
type Delivery struct {
	s       *session
	raw     amqp091.Delivery
	attempt int
	suspect bool // redelivered, not because this consumer returned it (Suspect)
}

// QuorumDelivery is one message from a quorum queue, which counts its deliveries itself.
// Attempt is settle-retry-count + x-delivery-count + 1.
type QuorumDelivery struct {
	Delivery
	count int
}

var (
	_ core.Delivery = (*Delivery)(nil)
	_ core.Delivery = (*QuorumDelivery)(nil)
)

// ID is the message id, or "tag-<n>@<queue>" for a message published without one.
func (d *Delivery) ID() string {
	if d.raw.MessageId != "" {
		return d.raw.MessageId
	}
	return "tag-" + strconv.FormatUint(d.raw.DeliveryTag, 10) + "@" + d.s.c.cfg.name
}

// Attempt is the number of this delivery, 1 on the first.
func (d *Delivery) Attempt() int { return d.attempt }

// Body is the raw payload.
func (d *Delivery) Body() []byte { return d.raw.Body }

// Headers returns the message's headers as strings (numbers in decimal, byte strings as they
// are, other values formatted), nil when it has none. The map is the caller's.
func (d *Delivery) Headers() map[string]string {
	if len(d.raw.Headers) == 0 {
		return nil
	}
	out := make(map[string]string, len(d.raw.Headers))
	for k, v := range d.raw.Headers {
		out[k] = headerString(v)
	}
	return out
}

// Redelivered reports RabbitMQ's redelivered flag: the message was delivered before (it was
// requeued, or its channel closed before it was settled) — or, on a classic queue, a node
// recovered it after an unclean stop, delivered before or not.
func (d *Delivery) Redelivered() bool { return d.raw.Redelivered }

// Queue names the queue the message was consumed from.
func (d *Delivery) Queue() string { return d.s.c.cfg.name }

// Raw returns the delivery as amqp091-go reported it (properties, raw header table, routing
// key). Settle it only through the handler's outcome.
func (d *Delivery) Raw() amqp091.Delivery { return d.raw }

// RedeliveryCount is how many times the quorum queue delivered this message before
// (x-delivery-count), 0 on its first delivery.
func (d *QuorumDelivery) RedeliveryCount() int { return d.count }

func headerString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int:
		return strconv.Itoa(x)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// retryCount reads settle-retry-count (0 when absent) strictly, as core.ParseCount does:
// digits only, no sign, no leading zero. A value of another type or form counts as 0 and err
// says why; one above core.MaxCount counts as core.MaxCount and err matches
// core.ErrCountClamped.
func retryCount(h amqp091.Table) (int, error) {
	v, present := h[RetryCountHeader]
	if !present {
		return 0, nil
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		return 0, fmt.Errorf("%s is a %T, not a decimal string", RetryCountHeader, v)
	}
	n, err := core.ParseCount(s)
	if err != nil && !errors.Is(err, core.ErrCountClamped) {
		return 0, err
	}
	return n, err
}

// deliveryCount reads a quorum queue's x-delivery-count (absent on the first delivery). A
// negative value counts as 0 and one above core.MaxCount as core.MaxCount, each with an error
// saying so; a value that is not an integer counts as 0.
func deliveryCount(h amqp091.Table) (int, error) {
	v, present := h["x-delivery-count"]
	if !present {
		return 0, nil
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int32:
		n = int64(x)
	case int16:
		n = int64(x)
	case int8:
		n = int64(x)
	case int:
		n = int64(x)
	case uint8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case uint32:
		n = int64(x)
	default:
		return 0, fmt.Errorf("x-delivery-count is a %T, not an integer", v)
	}
	switch {
	case n < 0:
		return 0, fmt.Errorf("x-delivery-count %d is negative; read as 0", n)
	case n > core.MaxCount:
		return core.MaxCount, fmt.Errorf("%w: x-delivery-count %d read as %d", core.ErrCountClamped, n, core.MaxCount)
	}
	return int(n), nil
}

// attemptOf is the attempt of a delivery: the copies before it (settle-retry-count), the
// returns of this copy (quorum: x-delivery-count; classic: 1 when redelivered), and this
// delivery. Each part is at most core.MaxCount, so the sum cannot overflow.
func attemptOf(copies, returns int) int { return copies + returns + 1 }
