package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// DialFunc opens a connection to RabbitMQ. URL returns one for a real server; amqptest's
// Broker.Dial is one for the in-process broker.
type DialFunc func() (Connection, error)

// URL returns a DialFunc that connects to the server at url (amqp://user:pass@host:port/vhost)
// through amqp091-go with its default configuration.
func URL(url string) DialFunc {
	return func() (Connection, error) {
		return Dial(url, amqp091.Config{
			Heartbeat:  10 * time.Second,
			Locale:     "en_US",
			Properties: amqp091.Table{"connection_name": "settle"},
		})
	}
}

// URLs returns a DialFunc for a RabbitMQ cluster: each dial tries the addresses in turn,
// starting with the one that last worked, and connects to the first that accepts, so that a
// Broker whose node went down reconnects to another node. Give every node of the cluster (or a
// load balancer's address); a quorum queue is served from any node, its leader wherever it is.
// The error of a dial that reached no node names every address's failure.
func URLs(urls ...string) DialFunc {
	var mu sync.Mutex
	next := 0
	return func() (Connection, error) {
		if len(urls) == 0 {
			return nil, errors.New("amqp.URLs: no address")
		}
		mu.Lock()
		start := next
		mu.Unlock()
		var errs []error
		for i := range urls {
			n := (start + i) % len(urls)
			c, err := URL(urls[n])()
			if err == nil {
				mu.Lock()
				next = n
				mu.Unlock()
				return c, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", redact(urls[n]), err))
		}
		mu.Lock()
		next = (start + 1) % len(urls)
		mu.Unlock()
		return nil, fmt.Errorf("no RabbitMQ node accepted a connection: %w", errors.Join(errs...))
	}
}

// redact hides the password of an AMQP URL for error messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// Broker is one RabbitMQ connection shared by a service's subscriptions and publishers. It is a
// core.Backend: register it with the App, which connects at start (core.Starter) and closes it
// after the subscriptions have stopped.
//
// When the connection drops, whoever needs it next (a subscription's consumer, a publisher)
// dials again; consumers retry with backoff on the clock, redeclare their topology when the
// Broker declares, and consume again. Every loss and every recovery is logged.
type Broker struct {
	dial    DialFunc
	declare bool
	log     *slog.Logger
	clock   clock.Clock
	backoff [2]time.Duration
	delays  *core.InProcessDelay

	mu     sync.Mutex
	conn   Connection
	dials  int // successful dials; more than one means reconnections
	closed bool
	// dialErr is why the last dial failed, cleared by a successful one (CheckHealth).
	dialErr   error
	dialErrAt time.Time

	pubMu    sync.Mutex
	pub      Channel        // plain publishings (Publish without WithConfirm)
	confirms []*confirmChan // idle confirm-mode channels (copies, Publish WithConfirm)

	copyBackoff [2]time.Duration
	copies      copyCounters
}

// BrokerOption configures a Broker.
type BrokerOption func(*Broker) error

// DeclareTopology makes subscriptions declare what they need (exchanges, queues, bindings, dead
// letter queues), idempotently, at start and after every reconnection. Off (the default), each
// subscription only checks passively that its queue and dead letter exist, and refuses to start
// naming what is missing. A quorum subscription with core.DeadLetterAfter needs it on: its cap
// becomes the queue's arguments, which only the declaring service sets.
func DeclareTopology(on bool) BrokerOption {
	return func(b *Broker) error { b.declare = on; return nil }
}

// WithLogger sets the logger for connection events and in-process delays (default
// slog.Default()). Subscriptions log through the App's logger.
func WithLogger(l *slog.Logger) BrokerOption {
	return func(b *Broker) error {
		if l == nil {
			return errors.New("amqp.WithLogger(nil): no logger")
		}
		b.log = l
		return nil
	}
}

// WithClock sets the clock of reconnection backoff and in-process delays (default: real).
// Give it the App's clock (core.App.Clock) when the App runs on a virtual one.
func WithClock(c clock.Clock) BrokerOption {
	return func(b *Broker) error {
		if c == nil {
			return errors.New("amqp.WithClock(nil): no clock")
		}
		b.clock = c
		return nil
	}
}

// ReconnectBackoff bounds the wait between attempts to reconnect a consumer: it starts at min
// and doubles up to max (defaults 100ms and 5s).
func ReconnectBackoff(min, max time.Duration) BrokerOption {
	return func(b *Broker) error {
		if min <= 0 || max < min {
			return fmt.Errorf("amqp.ReconnectBackoff(%v, %v): need 0 < min <= max", min, max)
		}
		b.backoff = [2]time.Duration{min, max}
		return nil
	}
}

// CopyRetryBackoff bounds how long a message whose copy the broker did not take (returned
// unroutable, nacked by a full queue, not confirmed) is held unacknowledged before it is
// returned to its queue: min after the first failure of copies to a destination, doubling with
// each consecutive one up to max, and back to min once a copy there is confirmed (defaults 1s
// and 30s). The wait runs on the Broker's clock.
func CopyRetryBackoff(min, max time.Duration) BrokerOption {
	return func(b *Broker) error {
		if min <= 0 || max < min {
			return fmt.Errorf("amqp.CopyRetryBackoff(%v, %v): need 0 < min <= max", min, max)
		}
		b.copyBackoff = [2]time.Duration{min, max}
		return nil
	}
}

// New returns a Broker that connects with dial. It does not connect yet: the App's start does
// (or the first publish).
func New(dial DialFunc, opts ...BrokerOption) (*Broker, error) {
	if dial == nil {
		return nil, errors.New("amqp.New: nil DialFunc")
	}
	b := &Broker{dial: dial, log: slog.Default(), clock: clock.Real(),
		backoff:     [2]time.Duration{100 * time.Millisecond, 5 * time.Second},
		copyBackoff: [2]time.Duration{time.Second, 30 * time.Second}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("amqp.New: nil option")
		}
		if err := o(b); err != nil {
			return nil, err
		}
	}
	b.delays = core.NewInProcessDelay(b.clock, b.log)
	return b, nil
}

// Start connects; it is called by the App before subscriptions open.
func (b *Broker) Start(ctx context.Context) error {
	if _, err := b.connection(); err != nil {
		return fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	return nil
}

// Close drops the delayed copies held in process (logged with their number), and closes the
// connection: unacknowledged deliveries return to their queues.
func (b *Broker) Close() error {
	b.delays.Close()
	b.mu.Lock()
	b.closed = true
	c := b.conn
	b.conn = nil
	b.mu.Unlock()
	if c == nil || c.IsClosed() {
		return nil
	}
	if err := c.Close(); err != nil && !errors.Is(err, amqp091.ErrClosed) {
		return err
	}
	return nil
}

// connection returns the open connection, dialling when there is none or it has closed.
func (b *Broker) connection() (Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, core.ErrClosed
	}
	if b.conn != nil && !b.conn.IsClosed() {
		return b.conn, nil
	}
	lost := b.conn != nil
	if lost {
		b.log.Warn("amqp: connection lost; reconnecting")
	}
	c, err := b.dial()
	if err != nil {
		b.dialErr, b.dialErrAt = err, b.clock.Now()
		return nil, err
	}
	b.dialErr = nil
	b.conn = c
	b.dials++
	if lost || b.dials > 1 {
		b.log.Info("amqp: reconnected", "connections", b.dials)
	}
	return c, nil
}

// channel opens a channel on the current connection.
func (b *Broker) channel() (Channel, error) {
	c, err := b.connection()
	if err != nil {
		return nil, err
	}
	return c.Channel()
}

// publish sends msg through the Broker's own publishing channel; with confirm it is published
// mandatory on a confirm-mode channel and waits for the broker's confirmation (see
// publishConfirmed). A publish that fails because the channel or connection died is tried once
// more on a fresh one: a message that failed to be written was not sent.
func (b *Broker) publish(ctx context.Context, exchange, key string, msg amqp091.Publishing, confirm bool) error {
	err := b.publishOnce(ctx, exchange, key, msg, confirm)
	if err == nil || errors.Is(err, ErrNotConfirmed) || errors.Is(err, ErrUnroutable) || ctx.Err() != nil {
		return err
	}
	var ae *amqp091.Error
	if !errors.As(err, &ae) {
		// A write error on the socket: the connection is broken even if the client has not
		// noticed yet, so it is closed and dialled again.
		b.mu.Lock()
		if c := b.conn; c != nil {
			_ = c.Close()
		}
		b.mu.Unlock()
	}
	b.log.Warn("amqp: publish failed; trying again on a new channel", "exchange", exchange, "routing_key", key, "error", err)
	return b.publishOnce(ctx, exchange, key, msg, confirm)
}

func (b *Broker) publishOnce(ctx context.Context, exchange, key string, msg amqp091.Publishing, confirm bool) error {
	if confirm {
		return b.publishConfirmed(ctx, exchange, key, true, msg)
	}
	b.pubMu.Lock()
	defer b.pubMu.Unlock()
	ch := b.pub
	if ch == nil || ch.IsClosed() {
		var err error
		if ch, err = b.channel(); err != nil {
			return err
		}
		b.pub = ch
	}
	if err := ch.PublishWithContext(ctx, exchange, key, false, false, msg); err != nil {
		b.pub = nil
		_ = ch.Close()
		return err
	}
	return nil
}
