package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// consumer is one subscription's consumer: its core.Source (Next hands out deliveries in
// delivery-tag order) and its core.Finisher (settle.go).
type consumer struct {
	b     *Broker
	cfg   *queueConfig
	topo  topology
	sub   core.Subscription
	log   *slog.Logger
	clock clock.Clock
	tag   string
	cap   int
	dest  string
	batch int
	delay delayer

	// dropByAck: the queue's dead-letter route is settle's cap destination (a quorum queue with
	// a cap), so a drop must not reject into it; it is acknowledged instead.
	dropByAck bool

	sess   atomic.Pointer[session]
	epoch  uint64 // of the last session opened; written by the goroutine that opens sessions
	closed atomic.Bool
}

var (
	_ core.Source   = (*consumer)(nil)
	_ core.Finisher = (*consumer)(nil)
)

func open(ctx context.Context, b *Broker, cfg *queueConfig, sub core.Subscription) (core.Source, core.Finisher, error) {
	o := sub.Options
	if o.Cap > 0 {
		if err := validName("core.DeadLetterAfter destination (a routing key on the default exchange)", o.DeadLetterTo); err != nil {
			return nil, nil, err
		}
	}
	c := &consumer{
		b: b, cfg: cfg, sub: sub, log: sub.Logger, clock: sub.Clock,
		cap: o.Cap, dest: o.DeadLetterTo,
		topo:      topology{cfg: cfg, args: cfg.queueArgs(o.Cap, o.DeadLetterTo), dest: o.DeadLetterTo},
		dropByAck: cfg.quorum && o.Cap > 0,
		tag:       consumerTag(sub.Name),
	}
	if c.log == nil {
		c.log = b.log
	}
	if c.clock == nil {
		c.clock = b.clock
	}
	c.delay = newDelayer(c)
	c.batch = 64
	if cfg.prefetch > 0 {
		c.batch = min(cfg.prefetch, 128) // a window's worth of acknowledgements per frame; see acker
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := c.topo.ensure(b, b.declare); err != nil {
		return nil, nil, err
	}
	if err := c.reopen(); err != nil {
		return nil, nil, fmt.Errorf("consume from queue %q: %w", cfg.name, err)
	}
	if cfg.quorum && o.Cap == 0 {
		c.log.Info("amqp: quorum queue without a cap; the server dead-letters or discards a message after its delivery limit", "delivery_limit", cfg.limit)
	}
	return c, c, nil
}

// consumerTag names the consumer after its subscription, within AMQP's 255-byte short string.
func consumerTag(name string) string {
	if len(name) > 200 {
		name = name[:200]
	}
	return "settle-" + name + "-" + randomID()
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// session is one channel with its consumer. Deliveries carry their session: a settlement for a
// delivery of a closed session is never sent on another channel.
type session struct {
	c          *consumer
	ch         Channel
	epoch      uint64
	deliveries <-chan amqp091.Delivery
	confirm    bool
	acks       acker
}

// reopen opens a channel on the Broker's connection (dialling again if it closed), redeclares
// when declaring, sets the prefetch and starts consuming.
func (c *consumer) reopen() error {
	if c.b.declare && c.epoch > 0 {
		if err := c.topo.ensure(c.b, true); err != nil {
			return err
		}
	}
	ch, err := c.b.channel()
	if err != nil {
		return err
	}
	fail := func(err error) error { _ = ch.Close(); return err }
	if c.cfg.prefetch > 0 {
		if err := ch.Qos(c.cfg.prefetch, 0, false); err != nil {
			return fail(fmt.Errorf("basic.qos %d: %w", c.cfg.prefetch, err))
		}
	}
	confirm := c.cfg.policy == Confirmed
	if confirm {
		if err := ch.Confirm(false); err != nil {
			return fail(fmt.Errorf("confirm mode: %w", err))
		}
	}
	dl, err := ch.Consume(c.cfg.name, c.tag, false, c.cfg.exclusive, false, false, nil)
	if err != nil {
		return fail(topologyErr("queue", c.cfg.name, nil, err))
	}
	c.epoch++
	s := &session{c: c, ch: ch, epoch: c.epoch, deliveries: dl, confirm: confirm}
	s.acks.init(s)
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	go func() {
		for range closes {
		}
		s.acks.die()
	}()
	if old := c.sess.Swap(s); old != nil {
		old.acks.die()
		_ = old.ch.Close()
	}
	return nil
}

// Next hands out the next delivery. When the channel or connection has closed it reconnects
// with backoff on the clock, logging each attempt.
func (c *consumer) Next(ctx context.Context) (core.Delivery, error) {
	for {
		s := c.sess.Load()
		if s == nil {
			if err := c.recover(ctx); err != nil {
				return nil, err
			}
			continue
		}
		var m amqp091.Delivery
		var ok bool
		select {
		case m, ok = <-s.deliveries:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			c.log.Warn("amqp: consumer channel closed; consuming again", "epoch", s.epoch)
			s.acks.die()
			c.sess.CompareAndSwap(s, nil)
			_ = s.ch.Close()
			continue
		}
		return c.wrap(s, m), nil
	}
}

// recover reopens the consumer, retrying with backoff until it succeeds or ctx ends.
func (c *consumer) recover(ctx context.Context) error {
	wait := c.b.backoff[0]
	for attempt := 1; ; attempt++ {
		if c.closed.Load() {
			return core.ErrClosed
		}
		err := c.reopen()
		if err == nil {
			c.log.Info("amqp: consuming again", "epoch", c.epoch, "attempts", attempt)
			return nil
		}
		if errors.Is(err, core.ErrClosed) {
			return err
		}
		c.log.Warn("amqp: reconnecting the consumer failed; backing off", "error", err, "attempt", attempt, "backoff", wait)
		if err := clock.Sleep(ctx, c.clock, wait); err != nil {
			return err
		}
		wait = clock.Backoff(wait, c.b.backoff[0], c.b.backoff[1])
	}
}

func (c *consumer) wrap(s *session, m amqp091.Delivery) core.Delivery {
	s.acks.handOut(m.DeliveryTag)
	n, ok := retryCount(m.Headers)
	if !ok {
		c.log.Warn("amqp: "+RetryCountHeader+" header is not a decimal string; counting it as 0",
			"message_id", m.MessageId, "value", fmt.Sprintf("%v (%T)", m.Headers[RetryCountHeader], m.Headers[RetryCountHeader]))
	}
	if c.cfg.quorum {
		dc := deliveryCount(m.Headers)
		return &QuorumDelivery{Delivery: Delivery{s: s, raw: m, attempt: n + dc + 1}, count: dc}
	}
	a := n + 1
	if m.Redelivered {
		a++
	}
	return &Delivery{s: s, raw: m, attempt: a}
}

// Close sends the acknowledgements still batched, cancels the consumer and closes its channel:
// deliveries prefetched but not handed out return to the queue.
func (c *consumer) Close() error {
	c.closed.Store(true)
	s := c.sess.Swap(nil)
	if s == nil {
		return nil
	}
	s.acks.flush(true)
	s.acks.die()
	_ = s.ch.Cancel(c.tag, false)
	if err := s.ch.Close(); err != nil && !errors.Is(err, amqp091.ErrClosed) {
		return err
	}
	return nil
}

// flushInterval bounds how long a settled acknowledgement waits for others to share its frame.
// A variable only so that a test can widen it (SetFlushInterval in export_test.go).
var flushInterval = 2 * time.Millisecond
