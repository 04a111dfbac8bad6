package redisq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/core"
)

// Defaults of a Queue.
const (
	// DefaultLease is how long an entry read by a consumer stays its own without an extension:
	// an entry idle in the pending list for longer is claimed again (XAUTOCLAIM).
	DefaultLease = 30 * time.Second
	// DefaultBlock is how long one XREADGROUP waits on the server for new entries.
	DefaultBlock = 500 * time.Millisecond
	// DefaultDelayPoll is how often a subscription looks for delayed entries that came due,
	// besides the times it knows of (its own delays, the earliest one it saw waiting).
	DefaultDelayPoll = time.Second
)

// DelayedSuffix is appended to a stream's key to name its delay set.
const DelayedSuffix = ":delayed"

// DedupSuffix is appended to a stream's key to name its dedup index: a hash from each
// core.DedupKey held by a pending message to that message's id.
const DedupSuffix = ":dedup"

// Queue is a stream and a consumer group on it: an endpoint a subscription opens. Processes
// that mount the same stream and group share its entries.
type Queue struct {
	c   *Client
	cfg queueConfig
}

var _ core.Endpoint = (*Queue)(nil)

type queueConfig struct {
	stream, delayed, dedup, group string
	lease, block, poll            time.Duration
	batch                         int
}

// QueueOption configures a Queue.
type QueueOption func(*queueConfig) error

// Group names the consumer group (default "settle"). It is created at the stream's start (id 0,
// so entries added before it are delivered) when it does not exist, with the stream.
func Group(name string) QueueOption {
	return func(c *queueConfig) error {
		if strings.TrimSpace(name) == "" {
			return errors.New("redisq.Group: the name is empty")
		}
		c.group = name
		return nil
	}
}

// Lease sets how long an entry read by a consumer stays its own (default DefaultLease). The
// subscription extends the lease of every entry it holds every third of it, so only a consumer
// that stopped (crashed, hung, lost the server) lets it run out; the entry is then claimed again
// and its delivery count raised. At least 100ms.
func Lease(d time.Duration) QueueOption {
	return func(c *queueConfig) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("redisq.Lease(%v): at least 100ms", d)
		}
		c.lease = d
		return nil
	}
}

// Block sets how long one XREADGROUP waits on the server for new entries (default DefaultBlock).
// It also bounds how long a stopping subscription waits for its last read.
func Block(d time.Duration) QueueOption {
	return func(c *queueConfig) error {
		if d < time.Millisecond || d > time.Minute {
			return fmt.Errorf("redisq.Block(%v): between 1ms and 1m", d)
		}
		c.block = d
		return nil
	}
}

// DelayPoll sets how often a subscription looks for delayed entries that came due (default
// DefaultDelayPoll).
func DelayPoll(d time.Duration) QueueOption {
	return func(c *queueConfig) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("redisq.DelayPoll(%v): at least 10ms", d)
		}
		c.poll = d
		return nil
	}
}

// Batch sets how many entries one read takes at most (default: the subscription's workers).
func Batch(n int) QueueOption {
	return func(c *queueConfig) error {
		if n < 1 || n > 10000 {
			return fmt.Errorf("redisq.Batch(%d): between 1 and 10000", n)
		}
		c.batch = n
		return nil
	}
}

// NewQueue returns the endpoint of the stream at key stream on c. Its delay set is the key
// stream+DelayedSuffix; on a Redis Cluster give the stream a hash tag ("{refunds}") so that
// both, and the dead-letter stream ("{refunds}.dead"), live in one slot.
func NewQueue(c *Client, stream string, opts ...QueueOption) (*Queue, error) {
	if c == nil {
		return nil, errors.New("redisq.NewQueue: no client")
	}
	if strings.TrimSpace(stream) == "" {
		return nil, errors.New("redisq.NewQueue: the stream key is empty")
	}
	q := &Queue{c: c, cfg: queueConfig{stream: stream, delayed: stream + DelayedSuffix, dedup: stream + DedupSuffix, group: "settle",
		lease: DefaultLease, block: DefaultBlock, poll: DefaultDelayPoll}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("redisq.NewQueue(%q): nil option", stream)
		}
		if err := o(&q.cfg); err != nil {
			return nil, fmt.Errorf("redisq.NewQueue(%q): %w", stream, err)
		}
	}
	return q, nil
}

// Queue names the queue: the stream's key.
func (q *Queue) Queue() string { return q.cfg.stream }

// Group is the consumer group's name.
func (q *Queue) Group() string { return q.cfg.group }

// Open creates the consumer group (and the stream) when missing and returns the subscription's
// source and finisher. The dead-letter destination of core.DeadLetterAfter is the key of a
// stream, created by the first dead letter.
func (q *Queue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	rdb, err := q.c.client()
	if err != nil {
		return nil, nil, err
	}
	err = rdb.XGroupCreateMkStream(ctx, q.cfg.stream, q.cfg.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return nil, nil, fmt.Errorf("redisq: create consumer group %q on stream %q at %s: %w",
			q.cfg.group, q.cfg.stream, q.c.addr(), err)
	}
	if sub.Options.Cap > 0 && sub.Options.DeadLetterTo == q.cfg.stream {
		return nil, nil, fmt.Errorf("redisq: stream %q: the dead-letter stream is the queue's own stream", q.cfg.stream)
	}
	s := newSource(q, rdb, sub)
	return s, s, nil
}
