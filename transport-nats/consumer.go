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
	nc    *nats.Conn // the Conn's connection (the same through reconnections)
	cfg   *queueConfig
	js    jetstream.JetStream
	cons  jetstream.Consumer
	st    jetstream.Stream // the queue's stream (health.go)
	log   *slog.Logger
	clock clock.Clock
	queue string
	batch int          // the most one fetch asks for: FetchBatch, or the automatic size's ceiling
	base  int          // the least: FetchBatch (then size never moves), or the worker count
	size  atomic.Int32 // the fetch size, between base and batch (fetchsize.go)
	// backlog is how many messages the stream holds for the consumer, not yet delivered, as
	// the latest delivery's metadata (or the consumer's info at the start) said; flowing says
	// that the last fetch came back full. A pull asks for no more than the backlog unless
	// flowing, and then waits no longer than flowWait (fetchsize.go).
	backlog atomic.Int64
	flowing atomic.Bool
	win     *window // how many of batch the next fetch asks for (window.go)
	gate    gate    // Next waits while a suspect delivery is out (window.go)
	lease   time.Duration
	dest    string

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
	flyMu    sync.Mutex
	flights  map[uint64]*flight // messages in hand by stream sequence (all of the consumer's stream; inflight.go)
	recent   recentSet          // sequences just acked or terminated; guarded by flyMu
	cf       confirmer          // confirmed acks and +TERMs waiting for their answer; guarded by flyMu (confirm.go)
	dl       dlBackoff
	advisory *nats.Subscription

	sub         core.Subscription // its Report, for events (telemetry.go)
	returned    returnedSet       // sequences returned with -NAK (Delivery.Suspect)
	unreconnect func()
	// reconnectedAt is when the connection was last restored (the clock's UnixNano; 0: never):
	// a fetch that fails soon after is retried at once (recovering).
	reconnectedAt atomic.Int64

	// lastDone is the latest delivery acknowledged or terminated: Close sends a request on its
	// ack subject as a barrier (see Close).
	lastDone atomic.Pointer[Delivery]

	stranded strandedWatch // the health check's sightings of stranded messages (health.go)
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
	nc, err := q.c.NATS()
	if err != nil {
		return nil, nil, err
	}
	c := &consumer{
		c: q.c, nc: nc, cfg: &q.cfg, js: js, cons: cons, st: t.st, log: sub.Logger, clock: sub.Clock, queue: q.cfg.subject,
		batch: q.cfg.fetchBatch, lease: leaseOf(ci), dest: o.DeadLetterTo,
		held: make(map[*Delivery]clock.Timer), wake: make(chan struct{}, 1), sub: sub,
	}
	c.base = c.batch
	if c.batch == 0 { // automatic
		c.batch = autoCeiling(ci)
		c.base = min(max(o.Workers, 1), c.batch)
	}
	c.size.Store(int32(c.base))
	c.backlog.Store(int64(c.batch))
	if ci != nil {
		c.backlog.Store(int64(min(ci.NumPending, 1<<31)))
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
	c.warnDurability(ctx, t.si)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.watchAdvisories(); err != nil {
		c.cancel()
		return nil, nil, err
	}
	if q.cfg.confirmAcks {
		if err := c.listen(); err != nil {
			c.cancel()
			if c.advisory != nil {
				_ = c.advisory.Unsubscribe()
			}
			return nil, nil, err
		}
	}
	c.unreconnect = q.c.onReconnect(func() {
		c.reconnectedAt.Store(c.clock.Now().UnixNano())
		c.report(core.Event{Kind: core.EventReconnected})
		c.dropStale()
	})
	c.undisconnect = q.c.onDisconnect(c.disconnected)
	c.loop.Add(1)
	go c.extend()
	return c, c, nil
}

// fetch is one pull request for a batch.
type fetch struct {
	batch  jetstream.MessageBatch
	cancel context.CancelFunc
	server string // the id of the server the request went to; "" while disconnected
	asked  int
	at     time.Time    // when it was requested
	got    atomic.Int32 // messages taken off it (Next and the lease loop)
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

// pull sends a pull request for a batch of fetchSize messages (FetchBatch, or automatic). The
// context's deadline sets the request's expiry on the server; Close cancels it.
func (c *consumer) pull() (*fetch, error) {
	n, wait := c.fetchSize()
	wait = c.pullWait(wait, c.nc.IsConnected())
	ctx, cancel := context.WithTimeout(c.ctx, wait)
	at := c.clock.Now()
	b, err := c.cons.Fetch(n, jetstream.FetchContext(ctx))
	if err != nil {
		cancel()
		if c.ctx.Err() != nil {
			return nil, core.ErrClosed
		}
		return nil, fmt.Errorf("fetch from consumer %q on stream %q: %w", c.cfg.durable, c.cfg.stream, err)
	}
	f := &fetch{batch: b, cancel: cancel, asked: n, at: at}
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
				if c.recovering(ctx, err) {
					continue
				}
				return nil, err
			}
			c.cur = f
		}
		f := c.cur
		c.curMu.Unlock()
		ch := f.batch.Messages()
		var m jetstream.Msg
		var ok bool
		// A message already waiting is taken without the three-way select, which locks every
		// channel it waits on (once per message on a busy subscription).
		select {
		case m, ok = <-ch:
		default:
			select {
			case m, ok = <-ch:
			case <-c.wake:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if ok {
			f.got.Add(1)
			if d := c.wrap(m); d != nil {
				return d, nil
			}
			continue
		}
		c.fetchEnded(f)
		if err := fetchErr(f); err != nil {
			err = c.fetchFailed(err)
			if c.recovering(ctx, err) {
				continue
			}
			return nil, err
		}
	}
}

// A restarted server accepts connections before JetStream has loaded its streams and
// consumers: until it has, pull requests fail (no responders, JetStream not ready). Returned to
// core, each failure would double the subscription's backoff (100 ms up to 5 s), and the first
// settlement after a restart could wait seconds after JetStream was back. So for recoverFor
// after a reconnection, a failed fetch is retried every recoverEvery instead, logged at debug
// level; after that, failures go to core as any other.
//
// A pull request sent while the connection is down, or in the first recoverFor after it came
// back, expires after recoverWait at most (on the server and in the client alike): a request the
// server lost around its restart, or took while its consumer was still loading and never
// answered, would otherwise hold the subscription for FetchWait, with the stream full. An idle
// subscription sends a request every recoverWait meanwhile, a few dozen in all.
const (
	recoverFor   = 10 * time.Second
	recoverEvery = 100 * time.Millisecond
	recoverWait  = 500 * time.Millisecond
)

// pullWait is how long the next pull request waits on the server for messages: wait (the fetch
// size's), or at most recoverWait while the connection is down or since it came back less than
// recoverFor ago (on the clock).
func (c *consumer) pullWait(wait time.Duration, connected bool) time.Duration {
	if !connected || c.reconnectedLately() {
		return min(wait, recoverWait)
	}
	return wait
}

// reconnectedLately reports whether the connection was restored less than recoverFor ago (on
// the clock).
func (c *consumer) reconnectedLately() bool {
	at := c.reconnectedAt.Load()
	return at != 0 && c.clock.Now().Sub(time.Unix(0, at)) <= recoverFor
}

// recovering reports whether the fetch that failed with err is retried (after recoverEvery on
// the clock): the connection is up and was restored less than recoverFor ago.
func (c *consumer) recovering(ctx context.Context, err error) bool {
	if c.ctx.Err() != nil || !c.nc.IsConnected() || !c.reconnectedLately() {
		return false
	}
	c.log.Debug("nats: fetching after a reconnection failed; trying again", "error", err, "wait", recoverEvery)
	return clock.Sleep(ctx, c.clock, recoverEvery) == nil
}

// fetchEnded is what a worker does when f, which it was taking messages from, has ended: every
// worker waiting on f sees that, and the one that forgets f sizes the next fetch.
func (c *consumer) fetchEnded(f *fetch) {
	if c.endFetch(f) {
		c.flowing.Store(f.asked > 0 && int(f.got.Load()) >= f.asked)
		c.adapt(f)
	}
}

// endFetch forgets f, whose messages have all been taken, and reports whether this call did
// (false: another worker had, or Close).
func (c *consumer) endFetch(f *fetch) bool {
	c.curMu.Lock()
	ended := c.cur == f
	if ended {
		c.cur = nil
	}
	c.curMu.Unlock()
	f.cancel()
	return ended
}

// fetchErr is how the ended fetch f failed: nil when it ended with its batch, its expiry or
// Close.
func fetchErr(f *fetch) error {
	if err := f.batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (c *consumer) fetchFailed(err error) error {
	return fmt.Errorf("fetch from consumer %q on stream %q: %w", c.cfg.durable, c.cfg.stream, err)
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
			c.cur.got.Add(1)
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
	f, ok := ackFields(m.Reply())
	if !ok {
		meta, err := m.Metadata()
		if err != nil {
			_ = m.Nak()
			c.log.Error("nats: a fetched message has no JetStream metadata; returned", "stream", c.cfg.stream, "consumer", c.cfg.durable,
				"subject", m.Subject(), "reply", m.Reply(), "error", err)
			return nil
		}
		f = metaFields{stream: meta.Stream, delivered: meta.NumDelivered, seq: meta.Sequence.Stream, stored: meta.Timestamp, pending: meta.NumPending}
	}
	c.backlog.Store(int64(min(f.pending, 1<<31)))
	key := seqKey{stream: f.stream, seq: f.seq}
	d := &Delivery{msg: m, attempt: int(f.delivered), seq: f.seq, key: key, src: c, stored: f.stored}
	if c.inHand(d, key, m) {
		return nil
	}
	d.suspect = c.suspectOf(f.seq, f.delivered)
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
		_ = c.nak(d, 0)
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
		_ = c.nak(d, 0)
	}
	c.leaseMu.Unlock()
	if c.advisory != nil {
		_ = c.advisory.Unsubscribe()
	}
	c.closeConfirmer()
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

// metaFields is what a subscription reads from a delivery's JetStream metadata.
type metaFields struct {
	stream         string
	delivered, seq uint64
	stored         time.Time
	pending        uint64 // messages the stream held for the consumer, not yet delivered
}

// ackFields reads metaFields from a delivery's reply subject, as nats.go's Metadata does but
// without allocating (it runs once per message):
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>[.<token>…]
//
// ok is false for any other shape, or a count that is not a positive decimal number: the
// caller then asks Metadata, which says what is wrong.
func ackFields(reply string) (f metaFields, ok bool) {
	const prefix = "$JS.ACK."
	if len(reply) <= len(prefix) || reply[:len(prefix)] != prefix {
		return f, false
	}
	rest := reply[len(prefix):]
	// One pass over the subject: where each token starts (a reply of more tokens than the
	// longest known shape has room for is read from its first ones, as before).
	var start [12]int
	n := 1
	for i := 0; i < len(rest); i++ {
		if rest[i] == '.' {
			if n == len(start) {
				break
			}
			start[n] = i + 1
			n++
		}
	}
	// tok is token i of the reply after the prefix (counting from first), "" past the end.
	tok := func(first, i int) string {
		j := first + i
		if j >= n {
			return ""
		}
		end := len(rest)
		if j+1 < n {
			end = start[j+1] - 1
		}
		return rest[start[j]:end]
	}
	first := 0
	switch {
	case n == 7:
	case n >= 9:
		first = 2 // domain, account hash
	default:
		return f, false
	}
	// stream, consumer, delivered, stream seq, consumer seq, time
	stream := tok(first, 0)
	delivered, ok1 := decimal(tok(first, 2))
	seq, ok2 := decimal(tok(first, 3))
	ns, ok3 := decimal(tok(first, 5))
	pending, ok4 := decimal(tok(first, 6))
	if stream == "" || !ok1 || !ok2 || !ok3 || !ok4 || ns > 1<<63-1 || delivered == 0 || seq == 0 {
		return f, false
	}
	return metaFields{stream: stream, delivered: delivered, seq: seq, stored: time.Unix(0, int64(ns)), pending: pending}, true
}

// decimal reads a decimal number of at most 19 digits (no sign, no other character): what
// strconv.ParseUint accepts of them, without its error values.
func decimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}
