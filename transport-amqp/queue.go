package amqp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// DefaultDeliveryLimit is the x-delivery-limit a quorum queue is declared with when neither
// core.DeadLetterAfter nor DeliveryLimit sets one: RabbitMQ 4's default, made explicit so that
// behaviour does not depend on the server's version (RabbitMQ 3 has no default limit).
const DefaultDeliveryLimit = 20

// PublishPolicy is how a subscription publishes the copies it makes — retries on a classic
// queue with a cap, waiting-queue (DLXTTL) and delayed-exchange (amqpdme) copies, dead letters —
// before it acknowledges the original, on classic and quorum queues alike.
type PublishPolicy uint8

const (
	// FireAndForget publishes the copy (mandatory) on the delivery's channel and acknowledges
	// the original right after it, on the same channel, without waiting for the broker. A
	// crash between the two duplicates, never loses; but a copy the broker does not take is
	// lost, because the original is already acknowledged: one returned unroutable (its queue
	// was deleted) or refused (nack: a full queue under x-overflow reject-publish) is counted
	// in CopyStats.Lost and logged (the channel is in confirm mode, so that refusals are seen;
	// nothing waits for them); one in flight when the connection drops is not seen. Opt in
	// only where those losses are acceptable; it saves the wait for a confirmation on failing
	// messages only.
	FireAndForget PublishPolicy = iota + 1
	// Confirmed publishes the copy mandatory on a confirm-mode channel and acknowledges the
	// original only once RabbitMQ has confirmed it. A copy returned unroutable, refused (nack)
	// or not confirmed before its channel closes leaves the original unacknowledged: it is held
	// back for a doubling wait (CopyRetryBackoff) and then rejected with requeue, so it comes
	// back without an immediate redelivery loop; the failure is logged (rate-limited) and
	// counted (Broker.CopyStats). The default.
	Confirmed
)

func (p PublishPolicy) String() string {
	switch p {
	case FireAndForget:
		return "fire_and_forget"
	case Confirmed:
		return "confirmed"
	}
	return fmt.Sprintf("publish_policy(%d)", uint8(p))
}

// ClassicOption configures a classic queue descriptor.
type ClassicOption interface{ applyClassic(*queueConfig) error }

// QuorumOption configures a quorum queue descriptor.
type QuorumOption interface{ applyQuorum(*queueConfig) error }

// QueueOption configures either kind of queue descriptor.
type QueueOption interface {
	ClassicOption
	QuorumOption
}

type queueOption func(*queueConfig) error

func (f queueOption) applyClassic(c *queueConfig) error { return f(c) }
func (f queueOption) applyQuorum(c *queueConfig) error  { return f(c) }

type classicOption func(*queueConfig) error

func (f classicOption) applyClassic(c *queueConfig) error { return f(c) }

type quorumOption func(*queueConfig) error

func (f quorumOption) applyQuorum(c *queueConfig) error { return f(c) }

// binding binds the queue to an exchange, declaring the exchange when settle declares.
type binding struct{ exchange, kind, key string }

type queueConfig struct {
	name       string
	quorum     bool
	durable    bool
	exclusive  bool
	autoDelete bool
	bindings   []binding
	prefetch   int
	args       amqp091.Table
	dlx        *[2]string // exchange, routing key
	policy     PublishPolicy
	limit      int
	limitSet   bool
	delay      Delay // where RetryAfter copies wait; nil: in the process
}

// Durable sets whether the classic queue survives a broker restart (default true). It matters
// only when settle declares the queue.
func Durable(on bool) ClassicOption {
	return classicOption(func(c *queueConfig) error { c.durable = on; return nil })
}

// Exclusive declares the classic queue exclusive to the Broker's connection: it is deleted when
// the connection closes, and redeclared after a reconnection.
func Exclusive() ClassicOption {
	return classicOption(func(c *queueConfig) error { c.exclusive = true; return nil })
}

// AutoDelete declares the classic queue auto-delete: RabbitMQ deletes it when its last
// consumer goes.
func AutoDelete() ClassicOption {
	return classicOption(func(c *queueConfig) error { c.autoDelete = true; return nil })
}

// PublishWith sets the policy for the copies the subscription publishes (default Confirmed).
func PublishWith(p PublishPolicy) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if p != FireAndForget && p != Confirmed {
			return fmt.Errorf("amqp.PublishWith(%v): unknown publish policy", p)
		}
		c.policy = p
		return nil
	})
}

// DeliveryLimit sets the quorum queue's x-delivery-limit when it is not derived from
// core.DeadLetterAfter: RabbitMQ dead-letters a message whose returns exceed it (on RabbitMQ
// 3.10, a limit of n allows n+1 deliveries). It needs a route for the spent messages
// (DeadLetterExchange) and DeclareTopology(true); without a route the spent message would be
// discarded, so the descriptor is refused.
func DeliveryLimit(n int) QuorumOption {
	return quorumOption(func(c *queueConfig) error {
		if n < 0 {
			return fmt.Errorf("amqp.DeliveryLimit(%d): the limit must not be negative", n)
		}
		c.limit, c.limitSet = n, true
		return nil
	})
}

// Bind binds the queue to exchange with routing key; when settle declares, the exchange is
// declared durable with kind ("direct", "fanout", "topic", "headers"), otherwise its existence is
// checked.
func Bind(exchange, kind, key string) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if exchange == "" {
			return fmt.Errorf("amqp.Bind(%q, %q, %q): the default exchange cannot be bound", exchange, kind, key)
		}
		if kind == "" {
			return fmt.Errorf("amqp.Bind(%q, %q, %q): the exchange kind is empty", exchange, kind, key)
		}
		if err := validName("amqp.Bind: exchange", exchange); err != nil {
			return err
		}
		if err := validName("amqp.Bind: routing key", key); err != nil {
			return err
		}
		c.bindings = append(c.bindings, binding{exchange, kind, key})
		return nil
	})
}

// DefaultQuorumPrefetch is a quorum queue's prefetch when Prefetch is not given. A quorum queue
// charges a delivery to every message its consumer held unacknowledged when the process died or
// the connection dropped, handled or not, so the window bounds how many messages one crash can
// charge (once: they come back first and run alone, see the package doc). 300 is where a raw
// amqp091-go consumer drained a quorum queue fastest on RabbitMQ 3.10 (with acknowledgements
// coalesced 128 to a frame): at 128 a single worker ran at about 0.8 of that, at 8 or 16 three
// to ten times slower (transport-amqp's README has the figures). Choose a smaller Prefetch
// (twice the workers) where crash loops matter more than throughput.
const DefaultQuorumPrefetch = 300

// Prefetch limits how many unacknowledged deliveries RabbitMQ sends the subscription's consumer
// (basic.qos). Unset, a quorum queue's is DefaultQuorumPrefetch and a classic queue's is the
// broker's default (no limit). Run handlers concurrently with core.Workers.
func Prefetch(n int) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if n < 1 {
			return fmt.Errorf("amqp.Prefetch(%d): the prefetch count must be positive", n)
		}
		if n > 65535 {
			return fmt.Errorf("amqp.Prefetch(%d): AMQP allows at most 65535", n)
		}
		c.prefetch = n
		return nil
	})
}

// DeadLetterExchange gives the queue its own dead-letter route (x-dead-letter-exchange and
// x-dead-letter-routing-key): messages the handler drops go there instead of vanishing. It is
// the queue's property, not settle's dead letter (core.DeadLetterAfter), which takes only
// messages that spent their attempts. An empty routing key keeps the message's own.
func DeadLetterExchange(exchange, key string) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if err := validName("amqp.DeadLetterExchange: exchange", exchange); err != nil {
			return err
		}
		if err := validName("amqp.DeadLetterExchange: routing key", key); err != nil {
			return err
		}
		c.dlx = &[2]string{exchange, key}
		return nil
	})
}

// BackstopMargin is how far above the cap a quorum queue's delivery limit is declared: with
// core.DeadLetterAfter(n, dest), x-delivery-limit is n + BackstopMargin. settle moves a message
// at its cap itself (a confirmed copy with its count and reason); the server's limit is the
// backstop for a message settle cannot move. Every original settle returns after a refused copy
// (a dead-letter or waiting queue deleted, full, or without a leader during an election) spends
// a delivery, and with the limit at the cap two such returns were enough for the server to move
// the message itself, without its count or reason. Above the cap settle gets BackstopMargin more
// deliveries to move it; its hold-back doubles from CopyRetryBackoff's minimum to its maximum
// (1 s to 30 s by default), so the server takes over only after about three minutes of
// refusals. A crash loop is not longer for it: a delivery past the cap goes to the dead letter
// without its handler.
const BackstopMargin = 10

// settleArgs are the queue arguments settle derives from its own options; Arguments refuses them.
var settleArgs = map[string]string{
	"x-queue-type":              "the descriptor type (Classic or Quorum)",
	"x-delivery-limit":          "DeliveryLimit or core.DeadLetterAfter",
	"x-dead-letter-exchange":    "DeadLetterExchange or core.DeadLetterAfter",
	"x-dead-letter-routing-key": "DeadLetterExchange or core.DeadLetterAfter",
	"x-dead-letter-strategy":    "the transport (at-least-once on every quorum queue with a dead-letter route)",
}

// Arguments adds raw queue arguments (x-max-length, x-message-ttl, x-overflow, …), declared
// with the queue. Keys must begin with "x-"; the ones settle sets itself are refused with the
// option that sets them.
func Arguments(args amqp091.Table) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if err := args.Validate(); err != nil {
			return fmt.Errorf("amqp.Arguments: %w", err)
		}
		for k, v := range args {
			if !strings.HasPrefix(k, "x-") {
				return fmt.Errorf("amqp.Arguments: key %q is not a queue argument (they begin with \"x-\")", k)
			}
			if by, ok := settleArgs[k]; ok {
				return fmt.Errorf("amqp.Arguments: %q is set by %s, not as a raw argument", k, by)
			}
			if c.args == nil {
				c.args = amqp091.Table{}
			}
			c.args[k] = v
		}
		return nil
	})
}

// ClassicQueue is a classic RabbitMQ queue as a subscription endpoint. RabbitMQ does not count
// its deliveries, so settle does: under core.DeadLetterAfter a retry publishes a copy with the
// settle-retry-count header raised and acknowledges the original.
type ClassicQueue struct {
	b   *Broker
	cfg queueConfig
}

// QuorumQueue is a quorum RabbitMQ queue as a subscription endpoint. The server counts
// deliveries (x-delivery-count) and dead-letters at its x-delivery-limit, so
// core.DeadLetterAfter becomes queue arguments and a retry stays a plain requeue.
type QuorumQueue struct {
	b   *Broker
	cfg queueConfig
}

var (
	_ core.Endpoint = (*ClassicQueue)(nil)
	_ core.Endpoint = (*QuorumQueue)(nil)
)

// Classic returns the classic queue name on b. It fails, naming the option, on an invalid
// option or a name over 255 bytes.
func Classic(b *Broker, name string, opts ...ClassicOption) (*ClassicQueue, error) {
	cfg := queueConfig{name: name, durable: true, policy: Confirmed}
	if err := newQueue(b, &cfg); err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("amqp.Classic(%q): nil option", name)
		}
		if err := o.applyClassic(&cfg); err != nil {
			return nil, fmt.Errorf("amqp.Classic(%q): %w", name, err)
		}
	}
	return &ClassicQueue{b: b, cfg: cfg}, nil
}

// Quorum returns the quorum queue name on b. A quorum queue is always durable, never exclusive
// or auto-delete. It fails, naming the option, on an invalid option or combination.
func Quorum(b *Broker, name string, opts ...QuorumOption) (*QuorumQueue, error) {
	cfg := queueConfig{name: name, quorum: true, durable: true, limit: DefaultDeliveryLimit, policy: Confirmed, prefetch: DefaultQuorumPrefetch}
	if err := newQueue(b, &cfg); err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("amqp.Quorum(%q): nil option", name)
		}
		if err := o.applyQuorum(&cfg); err != nil {
			return nil, fmt.Errorf("amqp.Quorum(%q): %w", name, err)
		}
	}
	if cfg.limitSet && cfg.dlx == nil {
		return nil, fmt.Errorf("amqp.Quorum(%q): DeliveryLimit(%d) without DeadLetterExchange: a message that spends its deliveries would be discarded; give it a route", name, cfg.limit)
	}
	if o, ok := cfg.args["x-overflow"]; ok && o != "reject-publish" && cfg.dlx != nil {
		return nil, fmt.Errorf("amqp.Quorum(%q): x-overflow %v with a dead-letter route: settle dead-letters at-least-once (x-dead-letter-strategy=at-least-once), which RabbitMQ honours only with x-overflow=reject-publish", name, o)
	}
	if cfg.limitSet && !b.declare {
		return nil, fmt.Errorf("amqp.Quorum(%q): DeliveryLimit(%d) needs DeclareTopology(true): the limit is a queue argument, which only a declaring service sets", name, cfg.limit)
	}
	return &QuorumQueue{b: b, cfg: cfg}, nil
}

func newQueue(b *Broker, cfg *queueConfig) error {
	if b == nil {
		return fmt.Errorf("amqp: queue %q: nil Broker", cfg.name)
	}
	if strings.TrimSpace(cfg.name) == "" {
		return errors.New("amqp: the queue name is empty")
	}
	return validName("amqp: queue name", cfg.name)
}

// Queue names the queue.
func (q *ClassicQueue) Queue() string { return q.cfg.name }

// Queue names the queue.
func (q *QuorumQueue) Queue() string { return q.cfg.name }

// Open checks or declares the queue, its bindings and the cap's dead-letter queue, then starts
// consuming.
func (q *ClassicQueue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	return open(ctx, q.b, &q.cfg, sub)
}

// Open checks the descriptor against the subscription's options (a cap needs
// DeclareTopology(true) and excludes DeliveryLimit and DeadLetterExchange), declares or checks
// the queue, its bindings and dead-letter queue, then starts consuming.
func (q *QuorumQueue) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	o := sub.Options
	if o.Cap > 0 {
		switch {
		case !q.b.declare:
			return nil, nil, fmt.Errorf("quorum queue %q: core.DeadLetterAfter(%d, %q) needs amqp.DeclareTopology(true): the cap becomes the queue's x-delivery-limit and dead-letter route, which only the declaring service sets, and a queue declared elsewhere carries its owner's arguments (set them there and mount without DeadLetterAfter)",
				q.cfg.name, o.Cap, o.DeadLetterTo)
		case q.cfg.limitSet:
			return nil, nil, fmt.Errorf("quorum queue %q: DeliveryLimit(%d) and core.DeadLetterAfter(%d, %q) both set the delivery limit; keep one", q.cfg.name, q.cfg.limit, o.Cap, o.DeadLetterTo)
		case q.cfg.dlx != nil:
			return nil, nil, fmt.Errorf("quorum queue %q: DeadLetterExchange and core.DeadLetterAfter(%d, %q) both set the dead-letter route; keep one", q.cfg.name, o.Cap, o.DeadLetterTo)
		}
	}
	return open(ctx, q.b, &q.cfg, sub)
}

// queueArgs are the arguments the queue is declared with for a subscription with cap (0: none)
// and dead letter dest.
func (c *queueConfig) queueArgs(cap int, dest string) amqp091.Table {
	t := amqp091.Table{}
	for k, v := range c.args {
		t[k] = v
	}
	if c.dlx != nil {
		t["x-dead-letter-exchange"] = c.dlx[0]
		if c.dlx[1] != "" {
			t["x-dead-letter-routing-key"] = c.dlx[1]
		}
	}
	if c.quorum {
		t["x-queue-type"] = "quorum"
		t["x-delivery-limit"] = int64(c.limit)
		if cap > 0 || c.dlx != nil {
			// The server moves a message at its delivery limit; at-most-once (RabbitMQ's
			// default) loses a message in the middle of that move when the broker stops or
			// crashes. At-least-once keeps it in the queue until the target confirmed it, and
			// RabbitMQ honours it only with reject-publish overflow (which changes nothing
			// without a length limit; with one, publishes past it are refused, nacked under
			// confirms, instead of dropping the oldest message).
			t["x-dead-letter-strategy"] = "at-least-once"
			t["x-overflow"] = "reject-publish"
		}
		if cap > 0 {
			// settle moves a message at its cap itself (core resolves the cap, and a delivery
			// past it goes to the dead letter without its handler); the server's limit is the
			// backstop for a message settle cannot move, far enough above the cap that the
			// returns settle makes itself after refused copies do not reach it (BackstopMargin).
			// Measured on RabbitMQ 3.10: a limit of n allows n+1 deliveries.
			t["x-delivery-limit"] = int64(cap + BackstopMargin)
			t["x-dead-letter-exchange"] = ""
			t["x-dead-letter-routing-key"] = dest
		}
	}
	if len(t) == 0 {
		return nil
	}
	return t
}
