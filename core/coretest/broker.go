package coretest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Broker is an in-memory backend: named queues of messages whose attempts the runtime counts,
// as on a classic AMQP queue or a SQL table. A retry re-enqueues a copy at the tail with the
// attempt raised; a retry-after holds the copy in core.InProcessDelay on the broker's clock; a
// dead letter lands in the named queue with the attempt it was last delivered with; an abandoned
// delivery goes back to the head with its attempt unchanged.
//
// It honours core.Ordered: once an ordered subscription opens on a queue, one message of each
// ordering key is ready or handed out at a time, a retried or abandoned one keeps its key, and
// claims rotate over keys (see docs/ordering.md).
//
// Its queues are core.Targets too, honouring every publish option (see Queue), and its
// Finisher publishes replies to its own queues atomically with the ack (core.ReplySettler).
type Broker struct {
	clock  clock.Clock
	delays *core.InProcessDelay
	nextID atomic.Int64

	mu      sync.Mutex
	queues  map[string]*memQueue
	closed  bool
	batches int // FinishBatch calls
}

// Stored is a message as a queue holds it.
type Stored struct {
	ID      string
	Body    []byte
	Headers map[string]string
	// Attempt is the attempt the message will be delivered as (1 when fresh); in a dead-letter
	// queue, the attempt it was last delivered with: the final count.
	Attempt int
	// EnqueuedAt is when Publish enqueued it, on the broker's clock; copies keep it.
	EnqueuedAt time.Time
	// ContentType, CorrelationID, OrderingKey, DedupKey, Priority and NotBefore are what the
	// message was published with through core's publish API (see Queue); copies keep them.
	ContentType   string
	CorrelationID string
	OrderingKey   string
	DedupKey      string
	Priority      int
	NotBefore     time.Time
}

type memQueue struct {
	ready   []*Stored // by priority, highest first; in order of arrival within one
	unacked int
	wake    chan struct{} // closed and replaced when a message is pushed while sources wait on it
	// sleepers counts the sources waiting on wake (reset when it is closed; one that gave up
	// waiting only costs a needless close).
	sleepers int
	held     map[*Stored]clock.Timer // published with a NotBefore still to come
	pending  map[string]string       // dedup key → id of the pending message that holds it

	// ordered is set once an ordered subscription (core.Ordered) opened on the queue: from
	// then on at most one message of each ordering key is ready, handed out or delayed (the
	// key's head), and lanes hold the others (see ordered.go).
	ordered bool
	lanes   map[string]*lane // held key → the messages waiting behind its head
}

// NewBroker returns an empty in-memory broker on c that logs its in-process delays to log.
func NewBroker(c clock.Clock, log *slog.Logger) *Broker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{clock: c, delays: core.NewInProcessDelay(c, log), queues: make(map[string]*memQueue)}
}

func (b *Broker) queue(name string) *memQueue {
	q := b.queues[name]
	if q == nil {
		q = &memQueue{wake: make(chan struct{})}
		b.queues[name] = q
	}
	return q
}

func (b *Broker) push(name string, m *Stored, head bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pushLocked(name, m, head)
}

// pushLocked makes m ready on the named queue: behind the messages of its priority or above, or,
// for head (an abandoned delivery), in front of those of its priority or below. b.mu is held.
func (b *Broker) pushLocked(name string, m *Stored, head bool) {
	q := b.queue(name)
	if q.ordered && q.queueBehind(m) {
		return
	}
	q.readyLocked(m, head)
}

// readyLocked makes m ready on q, behind or (head) in front of the messages of its priority.
func (q *memQueue) readyLocked(m *Stored, head bool) {
	i := len(q.ready)
	if head {
		i = 0
		for i < len(q.ready) && q.ready[i].Priority > m.Priority {
			i++
		}
	} else {
		for i > 0 && q.ready[i-1].Priority < m.Priority {
			i--
		}
	}
	q.ready = slices.Insert(q.ready, i, m)
	if q.sleepers > 0 {
		close(q.wake)
		q.wake = make(chan struct{})
		q.sleepers = 0
	}
}

// Publish enqueues a fresh message (attempt 1) and returns its id.
func (b *Broker) Publish(queue string, body []byte, headers map[string]string) string {
	id := strconv.FormatInt(b.nextID.Add(1), 10)
	b.push(queue, &Stored{ID: id, Body: body, Headers: maps.Clone(headers), Attempt: 1, EnqueuedAt: b.clock.Now()}, false)
	return id
}

// Messages returns a snapshot of the ready messages of a queue, in order.
func (b *Broker) Messages(queue string) []Stored {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshot(queue, false)
}

// snapshot copies the ready messages of a queue, removing them with take; b.mu is held.
func (b *Broker) snapshot(queue string, take bool) []Stored {
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	out := make([]Stored, len(q.ready), len(q.ready)+q.waiting())
	for i, m := range q.ready {
		out[i] = *m
	}
	out = q.appendWaiting(out, take)
	if take {
		for _, m := range q.ready {
			if q.ordered && m.OrderingKey != "" {
				delete(q.lanes, m.OrderingKey) // a ready head: nothing of its key is left
			}
		}
		q.ready = nil
	}
	return out
}

// Drain removes and returns the ready messages of a queue (their dedup keys are free again).
func (b *Broker) Drain(queue string) []Stored {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.snapshot(queue, true)
	if q := b.queues[queue]; q != nil {
		for i := range out {
			q.release(&out[i])
		}
	}
	return out
}

// Unacked returns how many messages of a queue are handed out and not yet settled.
func (b *Broker) Unacked(queue string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[queue]; q != nil {
		return q.unacked
	}
	return 0
}

// Batches returns how many batches the broker's finishers settled together
// (core.BatchFinisher), each under one lock.
func (b *Broker) Batches() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batches
}

// Delayed returns how many delayed copies wait in the process.
func (b *Broker) Delayed() int { return b.delays.Pending() }

// Close drops the delayed copies and the messages held for a NotBefore (they are in-process:
// at-most-once) and closes the broker.
func (b *Broker) Close() error {
	b.delays.Close()
	b.mu.Lock()
	b.closed = true
	for _, q := range b.queues {
		for m, t := range q.held {
			t.Stop()
			delete(q.held, m)
		}
	}
	b.mu.Unlock()
	return nil
}

// Queue returns the named queue as an endpoint to subscribe to and a target to publish to
// (core.NewPublisher). Publishing honours every option of core: MessageID (else the broker
// numbers messages), Headers, CorrelationID and OrderingKey (carried to the delivery: core.Keyed,
// core.Correlated), NotBefore and Delay (held on the broker's clock, in the process), DedupKey
// (a key is pending from its publish until its message is acknowledged, dropped,
// dead-lettered or drained) and Priority (the ready backlog is ordered by priority, highest
// first, in publish order within one).
func (b *Broker) Queue(name string) *Endpoint { return &Endpoint{b: b, name: name} }

// Endpoint is one queue of a Broker: a core.Endpoint and a core.Target.
type Endpoint struct {
	b    *Broker
	name string
}

var (
	_ core.BatchFinisher = (*finisher)(nil)
	_ core.Endpoint      = (*Endpoint)(nil)
	_ core.Target        = (*Endpoint)(nil)
)

// Queue names the queue.
func (e *Endpoint) Queue() string { return e.name }

// Open opens a subscription to the queue (core.Endpoint).
func (e *Endpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if e.b.closed {
		return nil, nil, fmt.Errorf("in-memory queue %q: %w", e.name, core.ErrClosed)
	}
	q := e.b.queue(e.name)
	if sub.Options.Ordered() {
		q.orderLocked()
	}
	return &source{e: e}, &finisher{e: e, held: core.NewHeldKeys(sub.Logger, e.b.clock, 10*time.Second)}, nil
}

type delivery struct {
	m     *Stored
	queue string
}

// The in-memory delivery carries what its message was published with.
var (
	_ core.Keyed      = (*delivery)(nil)
	_ core.Correlated = (*delivery)(nil)
)

func (d *delivery) ID() string                 { return d.m.ID }
func (d *delivery) Attempt() int               { return d.m.Attempt }
func (d *delivery) Body() []byte               { return d.m.Body }
func (d *delivery) Headers() map[string]string { return maps.Clone(d.m.Headers) }

// EnqueuedAt is when the message was published (core.Enqueued).
func (d *delivery) EnqueuedAt() (time.Time, bool) { return d.m.EnqueuedAt, !d.m.EnqueuedAt.IsZero() }

// MessagingSystem names the in-memory broker (core.MessagingSystem).
func (d *delivery) MessagingSystem() string { return "memory" }

// OrderingKey is the message's ordering key (core.Keyed).
func (d *delivery) OrderingKey() string { return d.m.OrderingKey }

// CorrelationID is the message's correlation id (core.Correlated).
func (d *delivery) CorrelationID() string { return d.m.CorrelationID }

type source struct{ e *Endpoint }

func (s *source) Next(ctx context.Context) (core.Delivery, error) {
	b := s.e.b
	for {
		b.mu.Lock()
		q := b.queue(s.e.name)
		if len(q.ready) > 0 {
			m := q.ready[0]
			q.ready[0] = nil
			q.ready = q.ready[1:]
			q.unacked++
			b.mu.Unlock()
			return &delivery{m: m, queue: s.e.name}, nil
		}
		wake := q.wake
		q.sleepers++
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

func (s *source) Close() error { return nil }

type finisher struct {
	e    *Endpoint
	held *core.HeldKeys // logs the keys a retry holds
}

// SettlesReplies reports whether t is a queue of the same broker: the replies to it are
// published with the acknowledgement, under one lock (core.ReplySettler).
func (f *finisher) SettlesReplies(t core.Target) bool {
	e, ok := t.(*Endpoint)
	return ok && e.b == f.e.b
}

func (f *finisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	b := f.e.b
	f.schedule(d, v)
	b.mu.Lock()
	err := f.settleLocked(d, v)
	b.mu.Unlock()
	settled(d, v, err)
}

// FinishBatch settles a batch's deliveries together, under one lock (core.BatchFinisher).
func (f *finisher) FinishBatch(ctx context.Context, ds []core.Delivery, vs []core.Verdict, settled core.Settled) {
	b := f.e.b
	for i, d := range ds {
		f.schedule(d, vs[i])
	}
	errs := make([]error, len(ds))
	b.mu.Lock()
	for i, d := range ds {
		errs[i] = f.settleLocked(d, vs[i])
	}
	b.batches++
	b.mu.Unlock()
	for i, d := range ds {
		settled(d, vs[i], errs[i])
	}
}

// schedule holds the copy of a retry-after on the broker's clock.
func (f *finisher) schedule(d core.Delivery, v core.Verdict) {
	if v.Action != core.ActRetryAfter {
		return
	}
	md := d.(*delivery)
	c := *md.m
	c.Attempt++
	f.e.b.delays.Schedule(md.queue, d, v.Delay, func() { f.e.b.back(md.queue, &c, false) })
}

// settleLocked performs v on d, but a retry-after's delay (schedule); b.mu is held.
func (f *finisher) settleLocked(d core.Delivery, v core.Verdict) error {
	md := d.(*delivery)
	b := f.e.b
	var err error
	q := b.queue(md.queue)
	switch v.Action {
	case core.ActAck:
		if err = f.replies(v.Replies); err != nil {
			q.backLocked(md.m, true) // not acknowledged: it comes back, as an abandoned one
			break
		}
		q.release(md.m)
		q.settleKeyLocked(md.m)
	case core.ActDrop:
		q.release(md.m)
		q.settleKeyLocked(md.m)
	case core.ActRetry:
		c := *md.m
		c.Attempt++
		q.backLocked(&c, false) // on an ordered queue, still holding its key
	case core.ActDeadLetter:
		q.release(md.m)
		q.settleKeyLocked(md.m)
		c := *md.m
		c.DedupKey = ""
		c.Headers = maps.Clone(c.Headers)
		if c.Headers == nil {
			c.Headers = make(map[string]string, 4)
		}
		core.NewDeadLetterInfo(d, v, md.queue, b.clock.Now()).AddTo(c.Headers)
		b.pushLocked(v.Dest, &c, false)
	case core.ActAbandon:
		q.backLocked(md.m, true)
	}
	if (v.Action == core.ActRetry || v.Action == core.ActRetryAfter) && q.ordered && md.m.OrderingKey != "" {
		if l := q.lanes[md.m.OrderingKey]; l != nil && len(l.waiting) > 0 {
			n := len(l.waiting)
			f.held.Wait(md.queue, md.m.OrderingKey, md.m.ID, md.m.Attempt, n)
		}
	}
	q.unacked--
	return err
}

// replies publishes an ack's replies with it; b.mu is held. A reply to another broker's queue
// (SettlesReplies said no) refuses the whole ack before anything is published.
func (f *finisher) replies(rs []core.Reply) error {
	for _, r := range rs {
		if !f.SettlesReplies(r.Target) {
			return fmt.Errorf("in-memory queue %q: reply %s to %q: not a queue of this broker", f.e.name, r.Message.ID, r.Target.Queue())
		}
	}
	for _, r := range rs {
		f.e.b.enqueueLocked(r.Target.(*Endpoint).name, r.Message)
	}
	return nil
}
