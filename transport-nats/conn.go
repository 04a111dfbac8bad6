package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Conn is one NATS connection with its JetStream context, shared by a service's subscriptions
// and publishers. It is a core.Backend: register it with the App, which connects at start
// (core.Starter) and closes it after the subscriptions have stopped.
//
// The URL may list several servers separated by commas (a cluster's seeds); the client also
// learns the cluster's other members from the server it reaches. It reconnects by itself, without
// limit, and every disconnection and reconnection is logged.
type Conn struct {
	url      string
	natsOpts []nats.Option
	declare  bool
	log      *slog.Logger
	clock    clock.Clock
	dlWait   [2]time.Duration
	timeout  time.Duration

	mu     sync.Mutex
	nc     *nats.Conn
	js     jetstream.JetStream
	closed bool

	evMu       sync.Mutex
	reconnects map[*func()]struct{} // subscriptions told of reconnections (telemetry.go)
	drops      map[*func()]struct{} // subscriptions and waiting requests told of disconnections
}

var (
	_ core.Backend = (*Conn)(nil)
	_ core.Starter = (*Conn)(nil)
)

// Option configures a Conn.
type Option func(*Conn) error

// DeclareTopology makes subscriptions declare what they need: the stream (with the queue's
// subject), the durable consumer, and a stream capturing the dead-letter subject of
// core.DeadLetterAfter. What exists already is compared with what would be declared, and a
// difference refuses the subscription (ErrMismatch), as it does when DeclareTopology is off
// (the default) and something is missing (ErrNotFound).
func DeclareTopology(on bool) Option {
	return func(c *Conn) error { c.declare = on; return nil }
}

// WithLogger sets the logger for connection events and advisories (default slog.Default()).
// Subscriptions log through the App's logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *Conn) error {
		if l == nil {
			return errors.New("natsjs.WithLogger(nil): no logger")
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock of the dead-letter retry backoff of publishers that are not
// subscriptions (default: real). Subscriptions use the App's clock.
func WithClock(c clock.Clock) Option {
	return func(n *Conn) error {
		if c == nil {
			return errors.New("natsjs.WithClock(nil): no clock")
		}
		n.clock = c
		return nil
	}
}

// NATSOptions passes options to nats.Connect (credentials, TLS, timeouts, a connection name).
// They are applied after settle's own (unlimited reconnects, logged connection events), so they
// can override them.
func NATSOptions(opts ...nats.Option) Option {
	return func(c *Conn) error {
		for i, o := range opts {
			if o == nil {
				return fmt.Errorf("natsjs.NATSOptions: option %d is nil", i)
			}
		}
		c.natsOpts = append(c.natsOpts, opts...)
		return nil
	}
}

// DeadLetterBackoff bounds how long a message whose dead-letter copy was not stored is held
// before it is returned to be delivered (and moved) again: first min, doubled after each failure
// in a row, at most max (defaults 100ms and 30s).
func DeadLetterBackoff(min, max time.Duration) Option {
	return func(c *Conn) error {
		if min <= 0 || max < min {
			return fmt.Errorf("natsjs.DeadLetterBackoff(%v, %v): need 0 < min <= max", min, max)
		}
		c.dlWait = [2]time.Duration{min, max}
		return nil
	}
}

// RequestTimeout bounds every JetStream API request and publish acknowledgement that has no
// deadline of its own, and the wait for the server's confirmation of an ack or a +TERM (at most
// the consumer's AckWait there): a confirmation that does not come within it is reported as an
// unknown settlement, ErrSettlementUnknown (default 5s).
func RequestTimeout(d time.Duration) Option {
	return func(c *Conn) error {
		if d <= 0 {
			return fmt.Errorf("natsjs.RequestTimeout(%v): must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// New returns a Conn to the NATS server(s) at url ("nats://host:4222", or several separated by
// commas). It does not connect yet: the App's start does, or the first publish.
func New(url string, opts ...Option) (*Conn, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errors.New("natsjs.New: the server URL is empty")
	}
	c := &Conn{url: url, log: slog.Default(), clock: clock.Real(),
		dlWait: [2]time.Duration{100 * time.Millisecond, 30 * time.Second}, timeout: 5 * time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("natsjs.New: nil option")
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start connects; it is called by the App before subscriptions open.
func (c *Conn) Start(ctx context.Context) error {
	if _, err := c.jetStream(); err != nil {
		return err
	}
	return ctx.Err()
}

// Close closes the connection. Deliveries fetched and not settled return to their consumers
// once their AckWait runs out; subscriptions give theirs back before (core closes them first).
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	nc := c.nc
	c.nc, c.js = nil, nil
	c.mu.Unlock()
	if nc == nil {
		return nil
	}
	if err := nc.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.log.Warn("nats: flushing before close", "error", err)
	}
	nc.Close()
	return nil
}

// NATS returns the underlying connection, connecting if needed.
func (c *Conn) NATS() (*nats.Conn, error) {
	if _, err := c.jetStream(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc == nil {
		return nil, core.ErrClosed
	}
	return c.nc, nil
}

// JetStream returns the connection's JetStream context, connecting if needed.
func (c *Conn) JetStream() (jetstream.JetStream, error) { return c.jetStream() }

func (c *Conn) jetStream() (jetstream.JetStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, core.ErrClosed
	}
	if c.js != nil {
		return c.js, nil
	}
	log := c.log
	opts := append([]nats.Option{
		nats.Name("settle"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil { // closed on purpose
				return
			}
			log.Warn("nats: disconnected; reconnecting", "server", nc.ConnectedUrlRedacted(), "error", err)
			c.disconnected()
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "server", nc.ConnectedUrlRedacted(), "reconnects", nc.Stats().Reconnects)
			c.reconnected()
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("nats: asynchronous error", "subject", subj, "error", err)
		}),
	}, c.natsOpts...)
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(c.url), err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(c.timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream on %s: %w", redact(c.url), err)
	}
	c.nc, c.js = nc, js
	return js, nil
}

// redact drops credentials from a URL list for logs and errors.
func redact(url string) string {
	parts := strings.Split(url, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme := ""
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				scheme = p[:s+3]
			}
			p = scheme + "***@" + p[at+1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
