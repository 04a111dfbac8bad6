package amqp

import (
	"context"
	"errors"
	"fmt"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/outbox"
)

// OutboxPublisher returns the outbox.Publisher that relays an outbox's records to RabbitMQ
// through b: each record is published to exchange ("" is the default exchange, where the
// record's destination is the queue name) with its destination as the routing key, its
// payload as the body, its headers, persistent, and Publish returns once RabbitMQ has
// confirmed it (publisher confirms); a nack or a closed channel leaves the record unpublished.
// With a non-empty idPrefix, the message id is idPrefix followed by the record id, so that a
// consumer can deduplicate by it as well as by the settle-outbox-id header; use a prefix of its
// own for every outbox table.
//
// The Broker is the service's own (registered with its App); a process that only consumes
// what the outbox relays needs neither an outbox nor this publisher.
func OutboxPublisher(b *Broker, exchange, idPrefix string) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, dest string, payload []byte, headers map[string]string) error {
		if b == nil {
			return errors.New("amqp.OutboxPublisher: nil Broker")
		}
		opts := []PublishOption{WithPayloadCodec(core.Raw), WithHeaders(headers), WithConfirm()}
		if rec := headers[outbox.HeaderID]; idPrefix != "" && rec != "" {
			opts = append(opts, WithMessageID(idPrefix+rec))
		}
		if err := Publish(ctx, b, exchange, dest, payload, opts...); err != nil {
			return fmt.Errorf("amqp.OutboxPublisher: %w", err)
		}
		return nil
	})
}
