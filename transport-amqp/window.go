package amqp

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rabbitmq/amqp091-go"
)

// The prefetch window (slow start).
//
// Every delivery a consumer holds unacknowledged when its process dies or its connection drops
// comes back redelivered, and a quorum queue charges each of them a delivery (x-delivery-count),
// handled or not. With the whole prefetch in flight, a poison message that crashes the process
// would charge every message prefetched beside it, and after a few crashes settle's cap at claim
// (and the server's delivery limit) would dead-letter innocent neighbours.
//
// So a session starts consuming with one unacknowledged delivery in flight (basic.qos 1), and
// keeps it while the deliveries that arrive are suspect (redelivered, not because this consumer
// returned them). After a crash the returned messages come back first (a classic queue puts them
// back in their places, a quorum queue serves its returns before the rest), so each of them —
// the poison among them — runs alone: its next crash charges only itself. The first clean
// delivery (not suspect) opens the full window: the queue's Prefetch (by default
// DefaultQuorumPrefetch on a quorum queue, no limit on a classic one). A fresh start
// on a queue without returns opens it with its first delivery, so a handler that waits for its
// peers (Workers) is not held to one delivery; suspect deliveries already run alone in the
// process (core.Suspect).
//
// The window opens in one step, and never closes again within a session: RabbitMQ applies a
// per-consumer prefetch only to consumers started after it, so a change means basic.cancel and
// basic.consume again, and on a quorum queue a delivery on its way to a consumer being cancelled
// is returned by the broker and charged a delivery (measured on RabbitMQ 3.10). The one moment a
// cancel cannot catch a delivery in flight is when the consumer holds its whole window
// unacknowledged; with a window of one that is each time a delivery arrives, before it is handed
// out, so that is when the window opens. A suspect delivery arriving in a full window (another
// consumer died, or a message a first crash returned behind clean ones) goes out ahead of the
// clean deliveries received before it (held.go) and runs alone in the process, but the
// deliveries prefetched beside it stay in flight: a message that crashes the
// process on its first delivery charges the window once, and only that once.

// window is a session's prefetch window. Finish (workers) counts clean settlements; only Next
// (the pull goroutine) opens the window.
type window struct {
	mu      sync.Mutex
	full    atomic.Bool // the full window is open; set under mu, read on the ack path without it
	tag     string
	stopped bool // the consumer was cancelled for good (stopping or closing)
}

// flushAt is how many batched acknowledgements make a frame: one under the window of one (the
// next delivery waits for it), a batch's worth after.
func (s *session) flushAt() int {
	if !s.win.full.Load() {
		return 1
	}
	return s.c.batch
}

// cancelForGood cancels the current consumer once; the window stays as it is.
func (s *session) cancelForGood() {
	w := &s.win
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	_ = s.ch.Cancel(w.tag, false)
}

// open opens the full window, while the consumer holds the clean delivery that arrived and has
// not handed it out yet (so the broker has nothing in flight to it): basic.cancel, basic.qos with
// the queue's Prefetch (0: no limit), basic.consume under a new tag. It returns the new
// consumer's deliveries, to be read once the old consumer's channel has closed (nil: open
// already); an error means the channel is unusable. Once the window is open (it never closes
// within a session) it returns at once, without the lock: Next calls it for every clean
// delivery.
func (s *session) open() (<-chan amqp091.Delivery, error) {
	w := &s.win
	if w.full.Load() {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full.Load() || w.stopped {
		return nil, nil
	}
	w.full.Store(true)
	if err := s.ch.Cancel(w.tag, false); err != nil {
		return nil, err
	}
	if err := s.ch.Qos(s.c.cfg.prefetch, 0, false); err != nil {
		return nil, err
	}
	tag := s.c.tag + "~" + strconv.FormatUint(s.epoch, 10)
	dl, err := s.ch.Consume(s.c.cfg.name, tag, false, s.c.cfg.exclusive, false, false, nil)
	if err != nil {
		return nil, err
	}
	w.tag = tag
	s.c.log.Debug("amqp: prefetch window open", "prefetch", s.c.cfg.prefetch, "epoch", s.epoch)
	return dl, nil
}

// ownReturns remembers the messages this consumer returned to their queue itself (a retry by
// requeue, an abandoned delivery, an original held back after a refused copy), so that their
// redelivery is not taken for the aftermath of a crash, and on a classic queue also the ones
// whose channel closed under a handler (classic.go: their redelivery counts an attempt, and
// stays suspect). Keyed by message id; a message without one is always suspect when redelivered
// and, on a classic queue, never counted.
type ownReturns struct {
	mu sync.Mutex
	m  map[string]int // message id → quorum: the x-delivery-count its redelivery will carry; classic: classicRequeued or classicLost
}

// maxOwnReturns bounds the memory: beyond it an arbitrary entry is forgotten (its message, if
// it comes back to this consumer, is merely taken as suspect).
const maxOwnReturns = 4096

func (r *ownReturns) record(id string, next int) {
	if id == "" {
		return
	}
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[string]int)
	}
	if _, ok := r.m[id]; !ok && len(r.m) >= maxOwnReturns {
		for k := range r.m {
			delete(r.m, k)
			break
		}
	}
	r.m[id] = next
	r.mu.Unlock()
}

// take reports the count recorded for id's redelivery, and forgets it.
func (r *ownReturns) take(id string) (int, bool) {
	if id == "" {
		return 0, false
	}
	r.mu.Lock()
	n, ok := r.m[id]
	if ok {
		delete(r.m, id)
	}
	r.mu.Unlock()
	return n, ok
}
