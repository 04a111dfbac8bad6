package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	held holdBack // waits of originals whose copies the broker did not take
	lost rateLog  // lines about FireAndForget copies the broker did not take

	returned ownReturns // messages this consumer requeued itself (window.go)

	// limit is the quorum queue's delivery limit (limit.go): a message this consumer returns
	// with an x-delivery-count of limit or more is dead-lettered by the server through route
	// (routed), or discarded (not routed); -1 on a classic queue or when the limit is unknown.
	limit  int
	routed bool
	route  string
	moved  rateLog // lines about originals returned past the limit after a refused copy

	sess     atomic.Pointer[session]
	epoch    uint64 // of the last session opened; written by the goroutine that opens sessions
	closed   atomic.Bool
	stopping atomic.Bool // the consumer was cancelled to give abandoned deliveries back
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
		topo:      topology{cfg: cfg, args: cfg.queueArgs(o.Cap, o.DeadLetterTo), dest: o.DeadLetterTo, log: sub.Logger},
		dropByAck: cfg.quorum && o.Cap > 0,
		tag:       consumerTag(sub.Name),
	}
	if c.log == nil {
		c.log = b.log
	}
	if c.clock == nil {
		c.clock = b.clock
	}
	if c.topo.log == nil {
		c.topo.log = c.log
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
	c.limit = -1
	switch {
	case cfg.quorum && o.Cap > 0:
		c.limit, c.routed, c.route = o.Cap+BackstopMargin, true, "queue "+o.DeadLetterTo
	case cfg.quorum:
		c.logLimit()
	}
	logDelay(c) // only for a subscription that starts
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
	next       <-chan amqp091.Delivery // the consumer a window change started; read once deliveries closes
	acks       acker
	win        window
	held       held        // deliveries received, not handed out yet (Next only)
	copies     unconfirmed // FireAndForget copies published on ch, not confirmed yet

	cancelOnce sync.Once // basic.cancel before the first abandoned delivery is given back

	holdMu       sync.Mutex
	holds        map[clock.Timer]struct{} // pending releases of held-back originals
	holdsStopped bool
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
	// Every session starts with a window of one delivery in flight (window.go).
	if err := ch.Qos(1, 0, false); err != nil {
		return fail(fmt.Errorf("basic.qos 1: %w", err))
	}
	var returns chan amqp091.Return
	var confirms chan amqp091.Confirmation
	if c.cfg.policy == FireAndForget {
		// Copies go out on this channel, mandatory, and their originals are acknowledged
		// right away: a copy the broker returns or refuses is lost, and is at least counted
		// and logged (fireandforget.go).
		if err := ch.Confirm(false); err != nil {
			return fail(fmt.Errorf("confirm mode for FireAndForget copies: %w", err))
		}
		returns = ch.NotifyReturn(make(chan amqp091.Return, 16))
		confirms = ch.NotifyPublish(make(chan amqp091.Confirmation, 64))
	}
	dl, err := ch.Consume(c.cfg.name, c.tag, false, c.cfg.exclusive, false, false, nil)
	if err != nil {
		return fail(topologyErr("queue", c.cfg.name, nil, err))
	}
	c.epoch++
	s := &session{c: c, ch: ch, epoch: c.epoch, deliveries: dl}
	if confirms != nil {
		go c.watchCopies(s, returns, confirms)
	}
	s.win = window{tag: c.tag}
	s.acks.init(s)
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	go func() {
		for range closes {
		}
		s.stopHolds()
		s.acks.die()
	}()
	if old := c.sess.Swap(s); old != nil {
		old.stopHolds()
		old.acks.die()
		_ = old.ch.Close()
	}
	return nil
}

// stopConsuming cancels the session's consumer once, before an abandoned delivery is given
// back: a delivery rejected with requeue would otherwise be sent again to this consumer, which
// is stopping and returns it once more when its channel closes — on a quorum queue that spends
// two attempts of the message for one abandon.
func (s *session) stopConsuming() {
	s.cancelOnce.Do(func() {
		s.c.stopping.Store(true)
		s.cancelForGood()
	})
}

// Next hands out the next delivery, a suspect one ahead of the clean ones received before it
// (held.go). When the channel or connection has closed it reconnects with backoff on the
// clock, logging each attempt.
func (c *consumer) Next(ctx context.Context) (core.Delivery, error) {
	for {
		s := c.sess.Load()
		if s == nil {
			if err := c.recover(ctx); err != nil {
				return nil, err
			}
			continue
		}
		c.collect(s)
		if d := s.held.pop(); d != nil {
			return d, nil
		}
		var m amqp091.Delivery
		var ok bool
		select {
		case m, ok = <-s.deliveries:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok && s.next != nil && !c.stopping.Load() {
			// The consumer cancelled for a window change has handed out all it was sent.
			s.deliveries, s.next = s.next, nil
			continue
		}
		if !ok {
			if c.stopping.Load() {
				// Cancelled to give abandoned deliveries back: the App is stopping.
				<-ctx.Done()
				return nil, ctx.Err()
			}
			c.log.Warn("amqp: consumer channel closed; consuming again", "epoch", s.epoch)
			s.acks.die()
			c.sess.CompareAndSwap(s, nil)
			_ = s.ch.Close()
			continue
		}
		s.held.push(c.arrived(s, &m))
	}
}

// arrived wraps a delivery as it is received; a clean one that arrives while the window is
// one delivery wide opens the full window. m is read, not kept (the delivery copies it).
func (c *consumer) arrived(s *session, m *amqp091.Delivery) core.Delivery {
	d := c.wrap(s, m)
	if s.next == nil && !base(d).suspect {
		// This clean delivery is the consumer's whole window, unacknowledged: the moment
		// the full window can open without a delivery in flight to the old consumer.
		next, err := s.open()
		if err != nil {
			// The channel is gone: d's settlement fails, and it comes back by itself.
			c.log.Warn("amqp: opening the prefetch window failed; consuming again", "error", err, "epoch", s.epoch)
		}
		s.next = next
	}
	return d
}

// collect takes the deliveries that have already arrived, without waiting, up to maxHeld held,
// so that a suspect one among them is seen. A closed channel is left for Next to find.
// Next calls it before each hand-out, so a suspect delivery that arrived while a handler ran
// goes ahead of the clean ones held.
func (c *consumer) collect(s *session) {
	for s.held.len() < maxHeld {
		select {
		case m, ok := <-s.deliveries:
			if !ok {
				if s.next == nil {
					// The channel is gone, or its consumer was cancelled for good: what it
					// held and did not hand out comes back to the queue by itself (amqp091
					// drops its own buffer the same way), so none of it is handed out now.
					s.held.reset()
				}
				return
			}
			s.held.push(c.arrived(s, &m))
		default:
			return
		}
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
			c.report(core.Event{Kind: core.EventReconnected})
			return nil
		}
		if errors.Is(err, core.ErrClosed) {
			return err
		}
		j := clock.Jitter(wait) // in [wait/2, wait], so that replicas do not reconnect in lockstep
		c.log.Warn("amqp: reconnecting the consumer failed; backing off", "error", err, "attempt", attempt, "backoff", wait, "wait", j)
		if err := clock.Sleep(ctx, c.clock, j); err != nil {
			return err
		}
		wait = clock.Backoff(wait, c.b.backoff[0], c.b.backoff[1])
	}
}

func (c *consumer) wrap(s *session, m *amqp091.Delivery) core.Delivery {
	n, err := retryCount(m.Headers)
	if err != nil {
		if errors.Is(err, core.ErrCountClamped) {
			c.log.Warn("amqp: "+RetryCountHeader+" header is above the bound; clamped",
				"message_id", m.MessageId, "value", headerString(m.Headers[RetryCountHeader]), "read_as", n, "error", err)
		} else {
			c.log.Warn("amqp: "+RetryCountHeader+" header is not a decimal string; counting it as 0",
				"message_id", m.MessageId, "value", fmt.Sprintf("%.40v (%T)", m.Headers[RetryCountHeader], m.Headers[RetryCountHeader]), "error", err)
		}
	}
	if c.cfg.quorum {
		dc, err := deliveryCount(m.Headers)
		if err != nil {
			c.log.Warn("amqp: x-delivery-count header out of range; read within [0, core.MaxCount]",
				"message_id", m.MessageId, "value", fmt.Sprintf("%v", m.Headers["x-delivery-count"]), "read_as", dc, "error", err)
		}
		// Suspect: returned more often than this consumer returned it itself. A first delivery
		// cannot be one of its returns: the map is only read for a redelivery.
		suspect := false
		if dc > 0 {
			own, ok := c.returned.take(m.MessageId)
			suspect = !ok || dc > own
		}
		return &QuorumDelivery{Delivery: Delivery{s: s, raw: *m, attempt: attemptOf(n, dc), suspect: suspect}, count: dc}
	}
	// The redelivered flag counts only for a delivery this process handed out itself (classic.go).
	returns := 0
	suspect := false
	if m.Redelivered {
		how, own := c.returned.take(m.MessageId)
		if own {
			returns = 1
		}
		suspect = !own || how == classicLost
	}
	return &Delivery{s: s, raw: *m, attempt: attemptOf(n, returns), suspect: suspect}
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
	s.stopHolds()
	s.acks.die()
	s.cancelOnce.Do(s.cancelForGood)
	if err := s.ch.Close(); err != nil && !errors.Is(err, amqp091.ErrClosed) {
		return err
	}
	return nil
}

// flushInterval bounds how long a settled acknowledgement waits for others to share its frame.
// A variable only so that a test can widen it (SetFlushInterval in export_test.go).
var flushInterval = 2 * time.Millisecond
