package natsjs

import (
	"context"
	"errors"

	"github.com/settlehq/settle/core/outbox"
)

// OutboxPublisher returns an outbox.Publisher that relays an outbox's records through c: each
// record is published to its destination subject with its headers and returns once JetStream
// has stored it. With a non-empty idPrefix, the record's Nats-Msg-Id is idPrefix followed by its
// outbox id, so the stream drops a record relayed twice within its duplicate window (after a
// restart, by the sweep); use a prefix of its own for every outbox table.
func OutboxPublisher(c *Conn, idPrefix string) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, dest string, payload []byte, headers map[string]string) error {
		if c == nil {
			return errors.New("natsjs.OutboxPublisher: nil Conn")
		}
		id := ""
		if rec := headers[outbox.HeaderID]; idPrefix != "" && rec != "" {
			id = idPrefix + rec
		}
		_, err := PublishRaw(ctx, c, dest, payload, headers, id)
		return err
	})
}
