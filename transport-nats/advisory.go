package natsjs

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// maxDeliveriesAdvisory is the server's event when a consumer stops delivering a message that
// reached MaxDeliver.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries int    `json:"deliveries"`
}

// AdvisoryMaxDeliveries is the subject of the server's max-deliveries advisory for a consumer.
func AdvisoryMaxDeliveries(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// watchAdvisories logs every max-deliveries advisory of the subscription's consumer: the
// server's backstop stopped a message that settle did not move (its dead letter kept failing,
// or the consumer's MaxDeliver is at or below the cap). The message stays in the stream,
// undelivered, until an operator acts (RepairStranded, once the ack floor passes it).
func (c *consumer) watchAdvisories() error {
	nc, err := c.c.NATS()
	if err != nil {
		return err
	}
	subj := AdvisoryMaxDeliveries(c.cfg.stream, c.cfg.durable)
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		var a maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &a); err != nil {
			c.log.Error("nats: unreadable max-deliveries advisory", "subject", m.Subject, "error", err, "size", len(m.Data))
			return
		}
		c.log.Error("nats: the server stopped delivering a message: it reached the consumer's MaxDeliver; it stays in the stream, stranded, until an operator moves it (settle stranded repair)",
			"queue", c.queue, "message_id", c.cfg.stream+":"+strconv.FormatUint(a.StreamSeq, 10), "attempt", a.Deliveries,
			"stream", a.Stream, "consumer", a.Consumer, "stream_seq", a.StreamSeq, "deliveries", a.Deliveries)
	})
	if err != nil {
		return fmt.Errorf("subscribe to the max-deliveries advisory %q: %w", subj, err)
	}
	c.advisory = sub
	return nil
}
