package settlewatermill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Subscriber is a Watermill message.Subscriber over settle Topics. Each Subscribe runs one
// settle subscription (a core.App of its own) on the topic's queue, so the attempt count, the
// DeadLetterAfter cap, the failure policies and the backend's claim form apply exactly as they
// do to a settle handler: the handler of that subscription hands each message to the channel
// Subscribe returns and settles it as the consumer says.
//
//	msg.Ack()                            → ack
//	msg.Nack()                           → retry (RetryAfter(d) with RedeliveryDelay(d)); at the cap, dead letter
//	not acked when the subscription ends → abandoned: it comes back (the attempt it was charged stays)
//
// With one worker (the default) a subscription hands out the next message only once the last
// one is acked or nacked. It is safe for concurrent use.
type Subscriber struct {
	topics Topics
	cfg    subConfig

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close
	running sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

type subConfig struct {
	group    string
	delay    time.Duration
	mount    []core.Option
	logger   *slog.Logger
	clock    clock.Clock
	shutdown time.Duration
}

// SubscriberOption configures a Subscriber.
type SubscriberOption func(*subConfig) error

// ConsumerGroup puts the Subscriber in consumer group name: subscribers of one group share the
// group's queue (each message goes to one of them), and every group receives every message
// published after the group first subscribed. It needs Topics built with FanOut.
func ConsumerGroup(name string) SubscriberOption {
	return func(c *subConfig) error {
		if name == "" {
			return errors.New("settlewatermill.ConsumerGroup(\"\"): the group name is empty")
		}
		c.group = name
		return nil
	}
}

// RedeliveryDelay makes msg.Nack() a retry after d (core.RetryAfter(d)) instead of an
// immediate retry. On a SQL queue the delay is the row's retry_after; on RabbitMQ it is the
// queue's delay (amqp.WithDelay), or held in the process without one.
func RedeliveryDelay(d time.Duration) SubscriberOption {
	return func(c *subConfig) error {
		if d <= 0 {
			return fmt.Errorf("settlewatermill.RedeliveryDelay(%v): the delay must be positive", d)
		}
		c.delay = d
		return nil
	}
}

// Mount adds settle subscription options to every subscription of the Subscriber:
// core.DeadLetterAfter (the cap and its dead letter, in place of Watermill's Retry and
// PoisonQueue middleware), core.Workers (messages handed out at once; default 1),
// core.Timeout, and the backend's own (sqlqueue.LeaseFor, sqlqueue.PollInterval, …). NewSubscriber
// refuses an invalid one, and core.WithCodec (payloads are Watermill's bytes); an option the
// backend does not understand fails Subscribe.
func Mount(opts ...core.Option) SubscriberOption {
	return func(c *subConfig) error {
		for i, o := range opts {
			if o == nil {
				return fmt.Errorf("settlewatermill.Mount: option %d is nil", i)
			}
		}
		c.mount = append(c.mount, opts...)
		return nil
	}
}

// WithLogger sets the logger of the Subscriber's subscriptions (default slog.Default()). Every
// line carries the topic, and per-message lines the queue, message_id and attempt.
func WithLogger(l *slog.Logger) SubscriberOption {
	return func(c *subConfig) error {
		if l == nil {
			return errors.New("settlewatermill.WithLogger(nil): no logger")
		}
		c.logger = l
		return nil
	}
}

// WithClock sets the clock of the Subscriber's subscriptions (default: real); give it the
// backend's clock when that is a virtual one.
func WithClock(c clock.Clock) SubscriberOption {
	return func(cfg *subConfig) error {
		if c == nil {
			return errors.New("settlewatermill.WithClock(nil): no clock")
		}
		cfg.clock = c
		return nil
	}
}

// CloseTimeout bounds each stage of a subscription's stop (default 30 s): waiting for the
// settlements of messages acked or nacked before it, then for its source to close.
func CloseTimeout(d time.Duration) SubscriberOption {
	return func(c *subConfig) error {
		if d <= 0 {
			return fmt.Errorf("settlewatermill.CloseTimeout(%v): the timeout must be positive", d)
		}
		c.shutdown = d
		return nil
	}
}

// NewSubscriber returns a Subscriber of topics. It fails, naming the option, on an invalid one.
func NewSubscriber(topics Topics, opts ...SubscriberOption) (*Subscriber, error) {
	if topics == nil {
		return nil, errors.New("settlewatermill.NewSubscriber: nil Topics")
	}
	cfg := subConfig{logger: slog.Default(), clock: clock.Real(), shutdown: 30 * time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("settlewatermill.NewSubscriber: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	// The mount options are checked now, once: each subscription applies them again.
	probe := &core.Options{}
	if err := probe.Apply(cfg.mount...); err != nil {
		return nil, fmt.Errorf("settlewatermill.Mount: %w", err)
	}
	if probe.Codec != nil {
		return nil, errors.New("settlewatermill.Mount: core.WithCodec does not apply: a Watermill payload is bytes and is handed over as it is (decode it in the handler)")
	}
	return &Subscriber{topics: topics, cfg: cfg, closing: make(chan struct{})}, nil
}

// errAbandoned is what a subscription's handler returns for a message its consumer never
// settled; the Finisher the subscription is opened with turns it into an abandon.
var errAbandoned = errors.New("settlewatermill: the subscription ended before the message was acked or nacked; abandoned, it comes back")

// Subscribe starts a settle subscription on topic's queue and returns the channel it hands
// messages to. The channel is closed when ctx is done or the Subscriber closes, after the
// message being handed out (if any) is abandoned and every settlement is done. A start-up
// problem (a missing table or queue, an option the backend refuses) is returned here.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.running.Add(1)
	s.mu.Unlock()
	started := false
	defer func() {
		if !started {
			s.running.Done()
		}
	}()

	ep, err := s.topics.Endpoint(ctx, topic, s.cfg.group)
	if err != nil {
		return nil, err
	}
	log := s.cfg.logger.With("topic", topic)
	if s.cfg.group != "" {
		log = log.With("consumer_group", s.cfg.group)
	}
	app := core.New(core.WithLogger(log), core.WithClock(s.cfg.clock), core.WithoutSignals(),
		core.WithShutdownTimeout(s.cfg.shutdown))
	subCtx, cancel := context.WithCancel(ctx)
	sub := &subscription{out: make(chan *message.Message), ctx: subCtx, delay: s.cfg.delay}
	opts := append([]core.Option{core.WithCodec(core.Raw)}, s.cfg.mount...)
	if err := core.Subscribe(app, abandoning{Endpoint: ep, done: subCtx.Done()}, sub.handle, opts...); err != nil {
		cancel()
		return nil, fmt.Errorf("settlewatermill: subscribe to topic %q: %w", topic, err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(subCtx) }()
	select {
	case <-app.Ready():
	case err := <-runErr:
		cancel()
		if err == nil { // Run stops without an error when told to while it starts
			err = context.Cause(subCtx)
		}
		return nil, fmt.Errorf("settlewatermill: subscribe to topic %q: %w", topic, err)
	}
	started = true
	go func() {
		defer s.running.Done()
		select {
		case <-subCtx.Done():
		case <-s.closing:
		}
		cancel() // handlers give their messages up, then Run stops the subscription
		if err := <-runErr; err != nil {
			log.Error("settlewatermill: subscription stopped with an error", "error", err)
		}
		close(sub.out)
	}()
	return sub.out, nil
}

// SubscribeInitialize creates or checks what a subscription of topic needs (the queue table, the
// consumer group's registration, the queue and its bindings) without taking a message, so that
// messages published before the first Subscribe reach the Subscriber's group. On RabbitMQ the
// queue is opened and closed again as a subscription would; nothing is consumed.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	ctx := context.Background()
	ep, err := s.topics.Endpoint(ctx, topic, s.cfg.group)
	if err != nil {
		return err
	}
	o := &core.Options{Workers: 1, OnError: core.PolicyRetry, OnPanic: core.PolicyRetry,
		OnDecodeError: core.PolicyDeadLetter, Codec: core.Raw}
	if err := o.Apply(s.cfg.mount...); err != nil {
		return fmt.Errorf("settlewatermill: initialize topic %q: %w", topic, err)
	}
	src, _, err := ep.Open(ctx, core.Subscription{Name: ep.Queue(), Options: o,
		Logger: s.cfg.logger.With("topic", topic, "queue", ep.Queue()), Clock: s.cfg.clock,
		Report: func(core.Event) {}})
	if err != nil {
		return fmt.Errorf("settlewatermill: initialize topic %q: %w", topic, err)
	}
	return src.Close()
}

// Close ends every subscription of the Subscriber (their channels close once their messages in
// hand are abandoned and every settlement is done) and waits for them. Later calls to Subscribe
// fail with ErrClosed. It is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.running.Wait()
	return nil
}

// subscription is one Subscribe: the handler of its settle subscription.
type subscription struct {
	out   chan *message.Message
	ctx   context.Context // done when the subscription ends
	delay time.Duration
}

// handle hands one delivery to the consumer and waits for its verdict.
func (s *subscription) handle(ctx context.Context, m *core.Message[[]byte]) error {
	if s.ctx.Err() != nil {
		return errAbandoned
	}
	msg := toWatermill(m.Delivery(), m.Payload)
	mctx, cancel := context.WithCancel(s.ctx)
	defer cancel() // the message's context ends with its settlement
	why := &cause{}
	msg.SetContext(withCause(mctx, why))
	select {
	case s.out <- msg:
	case <-s.ctx.Done():
		return errAbandoned
	case <-ctx.Done(): // a core.Timeout ran out before the consumer took it
		return ctx.Err()
	}
	select {
	case <-msg.Acked():
		return nil
	case <-msg.Nacked():
		return s.nack(why.get())
	case <-s.ctx.Done():
	case <-ctx.Done():
	}
	// The consumer may have settled the message just as the subscription ended: its word wins.
	select {
	case <-msg.Acked():
		return nil
	case <-msg.Nacked():
		return s.nack(why.get())
	default:
	}
	if s.ctx.Err() != nil {
		return errAbandoned
	}
	return ctx.Err()
}

// nack is the outcome of a nacked message: a retry, after the redelivery delay if there is one,
// because of the handler's error when RecordErrors caught it.
func (s *subscription) nack(why error) error {
	o := core.Retry()
	if s.delay > 0 {
		o = core.RetryAfter(s.delay)
	}
	if why != nil {
		o = o.Because(why)
	}
	return o
}

// toWatermill maps a delivery onto a Watermill message: the UUID from HeaderUUID, or the
// backend's message id where there is none; every other header as metadata, except RabbitMQ's
// own (x-…), which describe this delivery's history and cannot be published again; the attempt
// and the backend's id under MetadataAttempt and MetadataMessageID.
func toWatermill(d core.Delivery, payload []byte) *message.Message {
	h := d.Headers()
	id := d.ID()
	uuid := h[HeaderUUID]
	if uuid == "" {
		uuid = id
	}
	msg := message.NewMessage(uuid, payload)
	for k, v := range h {
		if k == HeaderUUID || (len(k) >= 2 && k[:2] == "x-") {
			continue
		}
		msg.Metadata[k] = v
	}
	msg.Metadata[MetadataAttempt] = strconv.Itoa(d.Attempt())
	msg.Metadata[MetadataMessageID] = id
	return msg
}
