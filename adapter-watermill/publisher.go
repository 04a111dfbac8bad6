package settlewatermill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Publisher is a Watermill message.Publisher over settle Topics: Publish stores the messages
// on the topic's queue (on fan-out Topics, on the queue of each of its consumer groups) and
// returns once they are durable. It is safe for concurrent use.
type Publisher struct {
	topics Topics
	closed atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to topics.
func NewPublisher(topics Topics) (*Publisher, error) {
	if topics == nil {
		return nil, errors.New("settlewatermill.NewPublisher: nil Topics")
	}
	return &Publisher{topics: topics}, nil
}

// Publish stores messages on topic, in order. Each message's UUID, metadata and payload are kept
// (see the package documentation for where). The values of the first message's context
// (trace context, say) reach the backend, not its cancellation: a message handed out by a
// Subscriber, whose context ends with its settlement, can be published again.
func (p *Publisher) Publish(topic string, messages ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if len(messages) == 0 {
		return nil
	}
	for i, m := range messages {
		if m == nil {
			return fmt.Errorf("settlewatermill: publish to topic %q: message %d is nil", topic, i)
		}
	}
	ctx := context.WithoutCancel(messages[0].Context())
	if err := p.topics.Publish(ctx, topic, messages); err != nil {
		return fmt.Errorf("settlewatermill: publish %d message(s) to topic %q: %w", len(messages), topic, err)
	}
	return nil
}

// Close makes later Publish calls fail with ErrClosed; publishes under way finish. The Topics
// and the backend stay open: they are the caller's.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}

// headersOf returns the headers a message is stored with: its metadata and, under HeaderUUID,
// its UUID.
func headersOf(m *message.Message) map[string]string {
	h := make(map[string]string, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		h[k] = v
	}
	h[HeaderUUID] = m.UUID
	return h
}
