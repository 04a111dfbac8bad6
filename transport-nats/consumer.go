package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// consumer is one subscription's pull consumer: its core.Source (Next hands out the messages of
// one fetch at a time) and its core.Finisher (settle.go).
type consumer struct {
	c     *Conn
	cfg   *queueConfig
	js    jetstream.JetStream
	cons  jetstream.Consumer
	log   *slog.Logger
	clock clock.Clock
	queue string
	batch int
	win   *window // how many of batch the next fetch asks for (window.go)
	gate  gate    // Next waits while a suspect delivery is out (window.go)
	lease time.Duration
	dest  string

	confirms     confirms // double acks waiting for the server (window.go)
	undisconnect func()

	ctx    context.Context // ends at Close: stops the fetch in flight and the lease loop
	cancel context.CancelFunc

	// The fetch being handed out, and the messages the lease loop took off it while they waited
	// for a free worker (wrapped and leased). Next takes the side ones first.
	curMu sync.Mutex
	cur   *fetch
	side  []*Delivery
	wake  chan struct{} // tells a waiting Next that side has messages

	leaseMu sync.Mutex
	head    *Delivery // fetched, not settled: extended with +WPI
	held    map[*Delivery]clock.Timer
	closed  bool
	loop    sync.WaitGroup

	acks     acks
	dl       dlBackoff
	advisory *nats.Subscription

	sub         core.Subscription // its Report, for events (telemetry.go)
	returned    returnedSet       // sequences returned with -NAK (Delivery.Suspect)
	unreconnect func()

	// lastDone is the latest delivery acknowledged or terminated: Close sends a request on its
	// ack subject as a barrier (see Close).
	lastDone atomic.Pointer[Delivery]
}

var (
	_ core.Source   = (*consumer)(nil)
	_ core.Finisher = (*consumer)(nil)
)

func open(ctx context.Context, q *Queue, sub core.Subscription) (core.Source, core.Finisher, error) {
	o := sub.Options
	if o.Cap > 0 {
		if err := validPublishSubject("core.DeadLetterAfter destination (a subject)", o.DeadLetterTo); err != nil {
			return nil, nil, err
		}
		if covers(q.cfg.subject, o.DeadLetterTo) {
			return nil, nil, fmt.Errorf("core.DeadLetterAfter(%d, %q): the dead-letter subject is the queue's own subject %q; dead letters would come back to it",
				o.Cap, o.DeadLetterTo, q.cfg.subject)
		}
	}
	js, err := q.c.jetStream()
	if err != nil {
		return nil, nil, err
	}
	t := topology{cfg: &q.cfg, declare: q.c.declare, cap: o.Cap, dest: o.DeadLetterTo}
	cons, ci, err := t.ensure(ctx, js)
	if err != nil {
		return nil, nil, err
	}
	c := &consumer{
		c: q.c, cfg: &q.cfg, js: js, cons: cons, log: sub.Logger, clock: sub.Clock, queue: q.cfg.subject,
		batch: max(o.Workers, 1), lease: leaseOf(ci), dest: o.DeadLetterTo,
		held: make(map[*Delivery]clock.Timer), wake: make(chan struct{}, 1), sub: sub,
	}
	if q.cfg.fetchBatch > 0 {
		c.batch = q.cfg.fetchBatch
	}
	if c.log == nil {
		c.log = q.c.log
	}
	if c.clock == nil {
		c.clock = q.c.clock
	}
	c.acks.c = c
	c.win = newWindow(c.clock, c.lease, c.batch, ci != nil && ci.NumAckPending > 0)
	c.dl = dlBackoff{min: q.c.dlWait[0], max: q.c.dlWait[1]}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.watchAdvisories(); err != nil {
		c.cancel()
		return nil, nil, err
	}
	c.unreconnect = q.c.onReconnect(func() {
		c.report(core.Event{Kind: core.EventReconnected})
		c.dropStale()
	})
	c.undisconnect = q.c.onDisconnect(c.confirms.cancelAll)
	c.loop.Add(1)
	go c.extend()
	return c, c, nil
}

// fetch is one pull request for a batch.
type fetch struct {
	batch  jetstream.MessageBatch
	cancel context.CancelFunc
	server string // the id of the server the request went to; "" while disconnected
}

// dropStale ends the fetch in flight when its pull request went to a server that is gone: the
// connection came back to a server with another id (a restarted nats-server draws a new one),
// which never heard of the request, so the fetch would wait out FetchWait for nothing. A request
// sent while disconnected went out on the reconnection and stands; one to the same server
// (a dropped connection, not a restart) stands too: ended here, the server would still deliver
// to it and the message would wait for its AckWait.
func (c *consumer) dropStale() {
	nc, err := c.c.NATS()
	if err != nil {
		return
	}
	now := nc.ConnectedServerId()
	c.curMu.Lock()
	defer c.curMu.Unlock()
	if f := c.cur; f != nil && f.server != "" && now != "" && f.server != now {
		f.cancel()
	}
}

// pull sends a pull request for a batch of the subscription's worker count (or FetchBatch). The
// context's deadline sets the request's expiry on the server; Close cancels it.
func (c *consumer) pull() (*fetch, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.fetchWait)
	b, err := c.cons.Fetch(c.win.batch(), jetstream.FetchContext(ctx))
	if err != nil {
		cancel()
		if c.ctx.Err() != nil {
			return nil, core.ErrClosed
		}
		return nil, fmt.Errorf("fetch from consumer %q on stream %q: %w", c.cfg.durable, c.cfg.stream, err)
	}
	f := &fetch{batch: b, cancel: cancel}
	if nc, err := c.c.NATS(); err == nil {
		f.server = nc.ConnectedServerId()
	}
	return f, nil
}

// Next hands out the next message of the current fetch, requesting a batch when the last one has
// ended. (Requesting the next batch before the current one is handed out was measured: no faster
// on a drain, and it claims twice as much.)
func (c *consumer) Next(ctx context.Context) (core.Delivery, error) {
	d, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	if d.suspect && c.batch > 1 {
		c.gate.hold(d)
	}
	return d, nil
}

func (c *consumer) next(ctx context.Context) (*Delivery, error) {
	for {
		if g := c.gate.wait(); g != nil {
			select {
			case <-g:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		c.curMu.Lock()
		if len(c.side) > 0 {
			d := c.side[0]
			c.side[0] = nil
			c.side = c.side[1:]
			c.curMu.Unlock()
			return d, nil
		}
		if c.cur == nil {
			f, err := c.pull()
			if err != nil {
				c.curMu.Unlock()
				return nil, err
			}
			c.cur = f
		}
		f := c.cur
		c.curMu.Unlock()
		select {
		case m, ok := <-f.batch.Messages():
			if ok {
				if d := c.wrap(m); d != nil {
					return d, nil
				}
				continue
			}
			c.curMu.Lock()
			if c.cur == f {
				c.cur = nil
			}
			c.curMu.Unlock()
			f.cancel()
			if err := f.batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("fetch from consumer %q on stream %q: %w", c.cfg.durable, c.cfg.stream, err)
			}
		case <-c.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeWaiting moves the messages that arrived in the current fetch but wait for a free worker
// onto the lease list (and the side queue Next serves first): the lease loop calls it before
// each extension, so that a message waiting behind slow handlers is extended like theirs.
func (c *consumer) takeWaiting() {
	c.curMu.Lock()
	defer c.curMu.Unlock()
	if c.cur == nil {
		return
	}
	ch := c.cur.batch.Messages()
	took := false
drain:
	for {
		select {
		case m, ok := <-ch:
			if !ok { // ended: Next finds out
				break drain
			}
			if d := c.wrap(m); d != nil {
				c.side = append(c.side, d)
				took = true
			}
		default:
			break drain
		}
	}
	if took {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// wrap makes a fetched message a delivery on the lease list; nil for a message without
// JetStream metadata, which cannot be settled (logged, and returned with -NAK).
func (c *consumer) wrap(m jetstream.Msg) *Delivery {
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Nak()
		c.log.Error("nats: a fetched message has no JetStream metadata; returned", "stream", c.cfg.stream, "consumer", c.cfg.durable,
			"subject", m.Subject(), "reply", m.Reply(), "error", err)
		return nil
	}
	d := &Delivery{msg: m, attempt: int(meta.NumDelivered), seq: meta.Sequence.Stream, src: c,
		stored: meta.Timestamp, suspect: c.suspectOf(meta.Sequence.Stream, meta.NumDelivered)}
	if d.suspect {
		c.win.suspect()
	}
	c.track(d)
	return d
}

// Close stops fetching and returns every message fetched but not handed out, and every message
// held after a failed dead letter, with -NAK: they are delivered again at once. It returns once
// the server has processed the acknowledgements sent before it: acknowledgements are published
// without a reply, and the server handles a consumer's acknowledgements in order, so a +WPI
// request on the ack subject of the latest acknowledged delivery (a no-op for a settled message)
// is answered only after all of them.
func (c *consumer) Close() error {
	if c.unreconnect != nil {
		c.unreconnect()
	}
	if c.undisconnect != nil {
		c.undisconnect()
	}
	c.acks.flush()
	c.gate.release(nil)
	defer c.barrier()
	c.cancel()
	c.loop.Wait() // the lease loop takes no more waiting messages
	c.curMu.Lock()
	for _, d := range c.side {
		c.untrack(d)
		_ = d.msg.Nak()
	}
	c.side = nil
	if f := c.cur; f != nil {
		f.cancel()
		for m := range f.batch.Messages() { // the fetch ends with its context
			_ = m.Nak()
		}
		c.cur = nil
	}
	c.curMu.Unlock()
	c.leaseMu.Lock()
	c.closed = true
	for d, t := range c.held {
		t.Stop()
		delete(c.held, d)
		c.untrackLocked(d)
		_ = d.msg.Nak()
	}
	c.leaseMu.Unlock()
	if c.advisory != nil {
		_ = c.advisory.Unsubscribe()
	}
	return nil
}

func (c *consumer) barrier() {
	d := c.lastDone.Load()
	if d == nil {
		return
	}
	nc, err := c.c.NATS()
	if err == nil {
		_, err = nc.Request(d.msg.Reply(), []byte("+WPI"), c.c.timeout)
	}
	if err != nil {
		c.log.Warn("nats: the server did not confirm the acknowledgements sent before closing; they may still be in flight",
			"stream", c.cfg.stream, "consumer", c.cfg.durable, "error", err)
	}
}
