package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
)

// DefaultAckWait is the lease of a delivery when the consumer is declared without AckWait:
// JetStream redelivers a message not acknowledged (nor extended with +WPI) within it.
const DefaultAckWait = 30 * time.Second

// BackstopMargin is how many deliveries past the cap the server allows by default: MaxDeliver
// is cap + BackstopMargin. Settle moves a message to its dead letter at the cap, or at the first
// delivery past it (a handler that never settles); the other deliveries of the margin absorb
// dead-letter copies that could not be stored, each of which returns the message once.
const BackstopMargin = 10

// DefaultFetchWait is how long one pull request waits on the server for messages.
const DefaultFetchWait = 5 * time.Second

// QueueOption configures a Queue.
type QueueOption func(*queueConfig) error

type queueConfig struct {
	subject  string
	stream   string
	durable  string
	subjects []string // the stream's subjects when declared; default [subject]

	// Settings given explicitly are compared with an existing stream or consumer; the others
	// are taken from the server (or the defaults when settle declares).
	replicas      int
	storage       *jetstream.StorageType
	retention     *jetstream.RetentionPolicy
	ackWait       time.Duration
	maxDeliver    int
	maxAckPending int

	confirmAcks bool
	fetchWait   time.Duration
	fetchBatch  int
}

// Stream names the stream that holds the queue (default: the subject with '.', '*', '>' and
// separators replaced by '_').
func Stream(name string) QueueOption {
	return func(c *queueConfig) error {
		if err := validName("natsjs.Stream", name); err != nil {
			return err
		}
		c.stream = name
		return nil
	}
}

// Durable names the durable consumer (default: as the stream). Processes that mount the same
// queue with the same durable share its messages.
func Durable(name string) QueueOption {
	return func(c *queueConfig) error {
		if err := validName("natsjs.Durable", name); err != nil {
			return err
		}
		c.durable = name
		return nil
	}
}

// StreamSubjects sets the subjects the stream captures when settle declares it (default: the
// queue's subject). Each must be the queue's subject or match it, or the other way round.
func StreamSubjects(subjects ...string) QueueOption {
	return func(c *queueConfig) error {
		if len(subjects) == 0 {
			return errors.New("natsjs.StreamSubjects(): name at least one subject")
		}
		for _, s := range subjects {
			if err := validSubject("natsjs.StreamSubjects", s); err != nil {
				return err
			}
		}
		c.subjects = append([]string(nil), subjects...)
		return nil
	}
}

// Replicas sets the stream's replica count (1, 3 or 5 on a cluster; default 1 when declared).
func Replicas(n int) QueueOption {
	return func(c *queueConfig) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("natsjs.Replicas(%d): JetStream allows 1 to 5", n)
		}
		c.replicas = n
		return nil
	}
}

// Storage sets the stream's storage (default jetstream.FileStorage when declared).
func Storage(s jetstream.StorageType) QueueOption {
	return func(c *queueConfig) error {
		if s != jetstream.FileStorage && s != jetstream.MemoryStorage {
			return fmt.Errorf("natsjs.Storage(%v): unknown storage type", s)
		}
		c.storage = &s
		return nil
	}
}

// Retention sets the stream's retention (default jetstream.WorkQueuePolicy when declared: a
// message leaves the stream once acknowledged or terminated).
func Retention(r jetstream.RetentionPolicy) QueueOption {
	return func(c *queueConfig) error {
		if r != jetstream.LimitsPolicy && r != jetstream.InterestPolicy && r != jetstream.WorkQueuePolicy {
			return fmt.Errorf("natsjs.Retention(%v): unknown retention policy", r)
		}
		c.retention = &r
		return nil
	}
}

// AckWait sets the consumer's AckWait, the lease of a delivery (default DefaultAckWait when
// declared). Settle extends it with +WPI while the handler works, every third of it.
func AckWait(d time.Duration) QueueOption {
	return func(c *queueConfig) error {
		if d < time.Second {
			return fmt.Errorf("natsjs.AckWait(%v): at least 1s", d)
		}
		c.ackWait = d
		return nil
	}
}

// MaxDeliver sets the consumer's MaxDeliver, the server's backstop: after n deliveries it stops
// delivering a message and publishes a max-deliveries advisory, which the subscription logs.
// Default: cap + BackstopMargin with core.DeadLetterAfter, unlimited without. With a cap it
// must be above the cap, so that settle can count a delivery past it and move the message.
func MaxDeliver(n int) QueueOption {
	return func(c *queueConfig) error {
		if n < 1 {
			return fmt.Errorf("natsjs.MaxDeliver(%d): at least 1", n)
		}
		c.maxDeliver = n
		return nil
	}
}

// MaxAckPending sets the consumer's MaxAckPending: how many deliveries may be unacknowledged
// across all its subscribers (default: the server's).
func MaxAckPending(n int) QueueOption {
	return func(c *queueConfig) error {
		if n < 1 {
			return fmt.Errorf("natsjs.MaxAckPending(%d): at least 1", n)
		}
		c.maxAckPending = n
		return nil
	}
}

// ConfirmAcks makes every acknowledgement a double ack: settle waits for the server to confirm
// it before the settlement counts as done, so an ack lost on the way — still in the client's
// buffer when the process dies, or with a dropped connection — reports an error (and the message
// comes back) instead of passing as settled. It is the default; the option stays for code that
// names it. It costs a round trip per message, taken by the handler's worker (the package README
// has the figures).
func ConfirmAcks() QueueOption {
	return func(c *queueConfig) error { c.confirmAcks = true; return nil }
}

// UnconfirmedAcks writes +ACKs without waiting for the server, batched, and reports an ack
// settled once it is written: faster (see the package README), but an ack still in the client's
// buffer when the process dies, or lost with the connection, was reported settled and the message
// is delivered again after its AckWait — the handler runs twice (at-least-once), nothing is lost.
func UnconfirmedAcks() QueueOption {
	return func(c *queueConfig) error { c.confirmAcks = false; return nil }
}

// FetchBatch fixes how many messages one pull request asks for. Without it the size is
// automatic: a subscription starts at its core.Workers and sizes each fetch by how fast the
// workers got through the last one (towards about 100 ms of work), up to DefaultMaxFetch (or the
// consumer's MaxAckPending or MaxRequestBatch, if lower). A FetchBatch above an existing
// consumer's MaxRequestBatch fails the subscription's start: the server would refuse it. Fetched
// messages wait for a free worker, leased (+WPI) all the while, and each is charged a delivery
// if the process dies holding it: a fixed batch bounds that for handlers whose speed varies; a
// batch of the worker count is the least a fetch holds. Either way a pull request asks for no
// more than the stream holds for the consumer, as the latest delivery said (at least one),
// unless the last fetch came back full: then it asks for the whole batch and waits on the
// server for at most 100 ms.
func FetchBatch(n int) QueueOption {
	return func(c *queueConfig) error {
		if n < 1 {
			return fmt.Errorf("natsjs.FetchBatch(%d): at least 1", n)
		}
		c.fetchBatch = n
		return nil
	}
}

// FetchWait sets how long one pull request waits on the server for messages
// (default DefaultFetchWait). While the connection is down, and for 10 s after it came back, a
// request waits 500 ms at most: a restarted server may lose one, and the subscription would
// otherwise wait out d before asking again.
func FetchWait(d time.Duration) QueueOption {
	return func(c *queueConfig) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("natsjs.FetchWait(%v): at least 100ms", d)
		}
		c.fetchWait = d
		return nil
	}
}

// Queue is a durable pull consumer on a JetStream stream, as a subscription endpoint. Messages
// published to its subject are captured by the stream and fetched in batches (FetchBatch, or
// sized automatically from the subscription's worker count).
type Queue struct {
	c   *Conn
	cfg queueConfig
}

var _ core.Endpoint = (*Queue)(nil)

// NewQueue returns the queue of messages published to subject on c: a stream capturing it
// (Stream) and a durable pull consumer on the stream (Durable), filtered on subject. It fails,
// naming the option, on an invalid subject, name or option.
func NewQueue(c *Conn, subject string, opts ...QueueOption) (*Queue, error) {
	if c == nil {
		return nil, fmt.Errorf("natsjs.NewQueue(%q): nil Conn", subject)
	}
	if err := validSubject("natsjs.NewQueue: subject", subject); err != nil {
		return nil, err
	}
	cfg := queueConfig{subject: subject, fetchWait: DefaultFetchWait, confirmAcks: true}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("natsjs.NewQueue(%q): nil option", subject)
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("natsjs.NewQueue(%q): %w", subject, err)
		}
	}
	if cfg.stream == "" {
		cfg.stream = nameOf(subject)
	}
	if cfg.durable == "" {
		cfg.durable = cfg.stream
	}
	if cfg.subjects == nil {
		cfg.subjects = []string{subject}
	}
	if !captures(cfg.subjects, subject) {
		return nil, fmt.Errorf("natsjs.NewQueue(%q): StreamSubjects %v do not capture the queue's subject", subject, cfg.subjects)
	}
	return &Queue{c: c, cfg: cfg}, nil
}

// Queue names the queue: its subject.
func (q *Queue) Queue() string { return q.cfg.subject }

// Stream names the stream.
func (q *Queue) Stream() string { return q.cfg.stream }

// Durable names the consumer.
func (q *Queue) Durable() string { return q.cfg.durable }

// Open declares or checks the stream, the consumer and the dead-letter subject's stream, then
// starts fetching.
func (q *Queue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	return open(ctx, q, sub)
}

// nameOf turns a subject into a stream or consumer name.
func nameOf(subject string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', '/', '\\', ' ', '\t', '\n', '\r':
			return '_'
		}
		return r
	}, subject)
}

func validName(what, name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("%s(%q): the name is empty", what, name)
	}
	if strings.ContainsAny(name, ".*>/\\ \t\r\n") {
		return fmt.Errorf("%s(%q): a stream or consumer name cannot contain '.', '*', '>', path separators or whitespace", what, name)
	}
	if len(name) > 255 {
		return fmt.Errorf("%s(%.40q…): %d bytes; at most 255", what, name, len(name))
	}
	return nil
}

// validSubject checks a subject for a queue or a stream: non-empty tokens, no whitespace, '>'
// only as the last token.
func validSubject(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s: the subject is empty", what)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("%s %q: a subject cannot contain whitespace", what, s)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("%s %q: empty token (leading, trailing or doubled '.')", what, s)
		case t == ">" && i != len(toks)-1:
			return fmt.Errorf("%s %q: '>' must be the last token", what, s)
		case len(t) > 1 && strings.ContainsAny(t, "*>"):
			return fmt.Errorf("%s %q: wildcards '*' and '>' must be whole tokens", what, s)
		}
	}
	return nil
}

// validPublishSubject also refuses wildcards: a message is published to one subject.
func validPublishSubject(what, s string) error {
	if err := validSubject(what, s); err != nil {
		return err
	}
	if strings.ContainsAny(s, "*>") {
		return fmt.Errorf("%s %q: a message cannot be published to a wildcard subject", what, s)
	}
	return nil
}

// captures reports whether one of the patterns matches subject, which may itself be a pattern
// (then a pattern must cover every subject it matches).
func captures(patterns []string, subject string) bool {
	for _, p := range patterns {
		if covers(p, subject) {
			return true
		}
	}
	return false
}

// covers reports whether every subject matched by s is matched by p.
func covers(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, t := range pt {
		if t == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		switch {
		case t == "*":
			if st[i] == ">" {
				return false
			}
		case t != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
