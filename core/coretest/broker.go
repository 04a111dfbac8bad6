package coretest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
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
type Broker struct {
	clock  clock.Clock
	delays *core.InProcessDelay
	nextID atomic.Int64

	mu     sync.Mutex
	queues map[string]*memQueue
	closed bool
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
}

type memQueue struct {
	ready   []*Stored
	unacked int
	wake    chan struct{} // closed and replaced when a message is pushed
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
	q := b.queue(name)
	if head {
		q.ready = append([]*Stored{m}, q.ready...)
	} else {
		q.ready = append(q.ready, m)
	}
	close(q.wake)
	q.wake = make(chan struct{})
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
	out := make([]Stored, len(q.ready))
	for i, m := range q.ready {
		out[i] = *m
	}
	if take {
		q.ready = nil
	}
	return out
}

// Drain removes and returns the ready messages of a queue.
func (b *Broker) Drain(queue string) []Stored {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshot(queue, true)
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

// Delayed returns how many delayed copies wait in the process.
func (b *Broker) Delayed() int { return b.delays.Pending() }

// Close drops the delayed copies (they are in-process: at-most-once) and closes the broker.
func (b *Broker) Close() error {
	b.delays.Close()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// Queue returns an endpoint for the named queue.
func (b *Broker) Queue(name string) core.Endpoint { return &endpoint{b: b, name: name} }

type endpoint struct {
	b    *Broker
	name string
}

func (e *endpoint) Queue() string { return e.name }

func (e *endpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if e.b.closed {
		return nil, nil, fmt.Errorf("in-memory queue %q: %w", e.name, core.ErrClosed)
	}
	e.b.queue(e.name)
	return &source{e: e}, &finisher{e: e}, nil
}

type delivery struct {
	m     *Stored
	queue string
}

func (d *delivery) ID() string                 { return d.m.ID }
func (d *delivery) Attempt() int               { return d.m.Attempt }
func (d *delivery) Body() []byte               { return d.m.Body }
func (d *delivery) Headers() map[string]string { return maps.Clone(d.m.Headers) }

// EnqueuedAt is when the message was published (core.Enqueued).
func (d *delivery) EnqueuedAt() (time.Time, bool) { return d.m.EnqueuedAt, !d.m.EnqueuedAt.IsZero() }

// MessagingSystem names the in-memory broker (core.MessagingSystem).
func (d *delivery) MessagingSystem() string { return "memory" }

type source struct{ e *endpoint }

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
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

func (s *source) Close() error { return nil }

type finisher struct{ e *endpoint }

func (f *finisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	md := d.(*delivery)
	b := f.e.b
	next := func() *Stored {
		c := *md.m
		c.Attempt++
		return &c
	}
	switch v.Action {
	case core.ActRetry:
		b.push(md.queue, next(), false)
	case core.ActRetryAfter:
		c := next()
		b.delays.Schedule(md.queue, d, v.Delay, func() { b.push(md.queue, c, false) })
	case core.ActDeadLetter:
		c := *md.m
		c.Headers = maps.Clone(c.Headers)
		if c.Headers == nil {
			c.Headers = make(map[string]string, 4)
		}
		core.NewDeadLetterInfo(d, v, md.queue, b.clock.Now()).AddTo(c.Headers)
		b.push(v.Dest, &c, false)
	case core.ActAbandon:
		b.push(md.queue, md.m, true)
	}
	b.mu.Lock()
	b.queue(md.queue).unacked--
	b.mu.Unlock()
	settled(d, v, nil)
}
