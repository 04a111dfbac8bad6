package natsjs

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
)

// Delivery is one JetStream message as a subscription received it. A handler reaches it with a
// type assertion on core.Message.Delivery() for what core.Delivery does not say: the stream
// sequence, the raw message.
type Delivery struct {
	msg     jetstream.Msg
	attempt int
	seq     uint64
	key     seqKey // stream and sequence: the subscription's messages in hand (inflight.go)
	src     *consumer
	stored  time.Time // when the stream stored it
	suspect bool      // delivered before, not returned by this subscription (Suspect)
	fl      flight    // its entry in the consumer's messages in hand, guarded by flyMu

	// The lease list of the consumer: deliveries fetched and not yet settled, which the consumer
	// extends with +WPI. Guarded by the consumer's lease mutex.
	prev, next *Delivery
	listed     bool
}

var _ core.Delivery = (*Delivery)(nil)

// ID is the message's Nats-Msg-Id header when it has one, otherwise "<stream>:<sequence>".
func (d *Delivery) ID() string {
	if h := d.msg.Headers(); h != nil {
		if id := h.Get(jetstream.MsgIDHeader); id != "" {
			return id
		}
	}
	return d.src.cfg.stream + ":" + strconv.FormatUint(d.seq, 10)
}

// Attempt is the server's delivery count (NumDelivered): 1 on the first delivery, raised by
// every redelivery — after a -NAK, a lapsed AckWait, a crash.
func (d *Delivery) Attempt() int { return d.attempt }

// Body is the message's payload.
func (d *Delivery) Body() []byte { return d.msg.Data() }

// Headers returns the message's headers, the first value of each, nil when it has none.
func (d *Delivery) Headers() map[string]string {
	return headerMap(d.msg.Headers())
}

// StreamSequence is the message's sequence number in its stream.
func (d *Delivery) StreamSequence() uint64 { return d.seq }

// Msg returns the JetStream message. Settle settles it: do not acknowledge it yourself.
func (d *Delivery) Msg() jetstream.Msg { return d.msg }

func headerMap(h nats.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}
