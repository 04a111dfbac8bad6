package settlewatermill

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/settlehq/settle/core"
)

// Topics maps Watermill topics onto queues of one settle backend: the endpoint factory that a
// Publisher and a Subscriber share. SQL (a group of one queue table per queue) and AMQP (a
// RabbitMQ queue per topic, or an exchange per topic and a queue per consumer group) build one;
// a custom backend implements it.
type Topics interface {
	// Endpoint returns the queue that the subscribers of topic in consumer group consume from
	// (group is "" for a Subscriber without ConsumerGroup), creating what the backend allows it
	// to create. It fails, naming the topic, when the group does not fit the Topics (a group
	// given to Topics that do not fan out, none given to Topics that do).
	Endpoint(ctx context.Context, topic, group string) (core.Endpoint, error)
	// Publish stores msgs on topic, in order: on its queue, or on the queue of every consumer
	// group of the topic. It returns nil only when every message is stored durably.
	Publish(ctx context.Context, topic string, msgs []*message.Message) error
}

// HeaderUUID is the header that carries a Watermill message's UUID on a backend whose message
// id cannot (a SQL row, whose id is its key). On RabbitMQ the UUID is the AMQP message id.
const HeaderUUID = "watermill-uuid"

// Metadata keys a Subscriber adds to every message it hands out.
const (
	// MetadataAttempt is the delivery's attempt number, in decimal: 1 on the first delivery.
	MetadataAttempt = "settle-attempt"
	// MetadataMessageID is the backend's id of the message (a row id, an AMQP message id).
	MetadataMessageID = "settle-message-id"
)

// ErrNoQueue is returned by Publish when no queue would take the message: on SQL fan-out Topics
// the topic has no consumer group yet (no subscriber of a group has subscribed to it or called
// SubscribeInitialize); on RabbitMQ the broker returned the message as unroutable (the topic's
// queue is not declared yet, or its fan-out exchange has no queue bound). Nothing is stored,
// and nothing is lost silently. (A RabbitMQ fan-out topic whose exchange does not exist yet
// fails with amqp.ErrNotConfirmed instead: the broker closes the channel.)
var ErrNoQueue = errors.New("settlewatermill: no queue takes the topic's messages")

// ErrClosed is returned by a Publisher or Subscriber used after Close.
var ErrClosed = errors.New("settlewatermill: closed")

// QueueNameFunc names the queue of a consumer group of a topic on fan-out Topics.
type QueueNameFunc func(topic, group string) string

// DefaultQueueName names a consumer group's queue "<topic>.<group>".
func DefaultQueueName(topic, group string) string { return topic + "." + group }

// checkGroup checks that group fits Topics that fan out (fanOut) or not.
func checkGroup(kind, topic, group string, fanOut bool) error {
	switch {
	case strings.TrimSpace(topic) == "":
		return fmt.Errorf("settlewatermill: %s: the topic is empty", kind)
	case fanOut && strings.TrimSpace(group) == "":
		return fmt.Errorf("settlewatermill: %s topic %q fans out to consumer groups: give the Subscriber a ConsumerGroup", kind, topic)
	case !fanOut && group != "":
		return fmt.Errorf("settlewatermill: %s topic %q: ConsumerGroup(%q) needs Topics built with FanOut (without it a topic is one queue that every subscriber shares)", kind, topic, group)
	}
	return nil
}
