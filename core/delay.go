package core

import (
	"log/slog"
	"sync"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// InProcessDelay holds delayed copies in the process for a backend that has no delay of its
// own: RetryAfter(d) schedules the copy here and settles the original at once, and the copy is
// released (published back, re-enqueued) after d on the clock.
//
// This is at-most-once: a copy waiting here is lost if the process stops before d has passed.
// Every scheduled copy is logged at warning level with its queue, message id and attempt, and
// Close logs how many copies it dropped. Backends that can keep delays (a retry_after column, a
// waiting queue) do not use it.
type InProcessDelay struct {
	clock   clock.Clock
	log     *slog.Logger
	mu      sync.Mutex
	next    uint64
	pending map[uint64]clock.Timer
	closed  bool
}

// NewInProcessDelay returns an InProcessDelay on c that logs to log.
func NewInProcessDelay(c clock.Clock, log *slog.Logger) *InProcessDelay {
	return &InProcessDelay{clock: c, log: log, pending: make(map[uint64]clock.Timer)}
}

// Schedule calls release in its own goroutine after d, unless Close is called first. queue and
// the delivery name the copy in the log.
func (p *InProcessDelay) Schedule(queue string, d Delivery, delay time.Duration, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.log.Warn("delayed copy lost: the in-process delay is closed",
			"queue", queue, "message_id", d.ID(), "attempt", d.Attempt(), "delay", delay)
		return
	}
	p.next++
	id := p.next
	p.pending[id] = p.clock.AfterFunc(delay, func() {
		p.mu.Lock()
		_, ok := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ok {
			release()
		}
	})
	p.log.Warn("delayed copy held in process (at-most-once: lost if the process stops first)",
		"queue", queue, "message_id", d.ID(), "attempt", d.Attempt(), "delay", delay)
}

// Pending returns the number of copies waiting.
func (p *InProcessDelay) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// Close drops every waiting copy and returns how many it dropped.
func (p *InProcessDelay) Close() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	n := 0
	for id, t := range p.pending {
		if t.Stop() {
			n++
		}
		delete(p.pending, id)
	}
	if n > 0 {
		p.log.Warn("in-process delay closed: delayed copies lost", "lost", n)
	}
	return n
}
