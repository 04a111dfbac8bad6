package engine

import (
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// wakes is the process's registry of the queues that have claimants: a publish in this process
// wakes the claimants of its queue at once instead of letting them wait for their poll interval.
// A queue's entry lives while a subscription of it is open (acquire … release): closed
// subscriptions leave nothing behind, and their DBs can be collected.
var wakes = &registry{m: make(map[wakeKey]*Wake)}

type wakeKey struct {
	db    driver.DB
	queue driver.QueueRef
}

type registry struct {
	mu sync.Mutex
	m  map[wakeKey]*Wake
}

// Wake is one queue's wake-up: a channel closed (and replaced) on every Notify.
type Wake struct {
	key  wakeKey
	refs int // the subscriptions holding it; under registry.mu

	mu sync.Mutex
	ch chan struct{}
}

// acquire returns the entry of queue q on db, made if none is open, for one more subscription.
func (h *registry) acquire(db driver.DB, q driver.QueueRef) *Wake {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := wakeKey{db: db, queue: q}
	w := h.m[k]
	if w == nil {
		w = &Wake{key: k, ch: make(chan struct{})}
		h.m[k] = w
	}
	w.refs++
	return w
}

// release gives back a subscription's hold on w; the last one removes it from the registry.
func (w *Wake) release() {
	wakes.mu.Lock()
	defer wakes.mu.Unlock()
	w.refs--
	if w.refs == 0 && wakes.m[w.key] == w {
		delete(wakes.m, w.key)
	}
}

// NotifyQueue wakes this process's claimants of queue q on db, if it has any.
func NotifyQueue(db driver.DB, q driver.QueueRef) {
	wakes.mu.Lock()
	w := wakes.m[wakeKey{db: db, queue: q}]
	wakes.mu.Unlock()
	if w != nil {
		w.Notify()
	}
}

// WakeEntries is how many queues have open subscriptions in this process (for tests).
func WakeEntries() int {
	wakes.mu.Lock()
	defer wakes.mu.Unlock()
	return len(wakes.m)
}

// Wait returns the channel the next Notify closes; take it before looking for rows, so that a
// publish between the look and the wait is not missed.
func (w *Wake) Wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

// Notify wakes every claimant waiting on the queue.
func (w *Wake) Notify() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// WakeAfter wakes this process's claimants of a queue a settlement made a row ready in: the
// queue itself after a retry or an abandon, the dead-letter group after a move. They would
// otherwise find the row only at their next poll.
func (rt *Runtime) WakeAfter(v core.Verdict) {
	switch {
	case v.Action == core.ActRetry || v.Action == core.ActAbandon:
		rt.Wake.Notify()
	case v.Action == core.ActRetryAfter && v.Delay < rt.Cfg.Poll:
		rt.WakeAt(v.Delay)
	case v.Action == core.ActDeadLetter && rt.S.Group != "":
		NotifyQueue(rt.DB, driver.QueueRef{Table: rt.S.Table.Ref(), Group: v.Dest})
	}
}

// WakeAt wakes this queue's claimants once a row delayed by d is ready, so that a delay shorter
// than the poll interval is not stretched to it. Rows delayed by other processes are found by
// polling.
func (rt *Runtime) WakeAt(d time.Duration) { rt.delays.at(rt.Clock, d, rt.Wake.Notify) }

// delays are the wake-ups a subscription armed for the rows it delayed.
type delays struct {
	mu     sync.Mutex
	list   []delayedWake
	closed bool
}

// delayedWake is a wake-up armed for a row this process delayed.
type delayedWake struct {
	due time.Time
	t   clock.Timer
}

// at arms notify to run after d, forgetting the wake-ups already due.
func (w *delays) at(c clock.Clock, d time.Duration, notify func()) {
	now := c.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	live := w.list[:0]
	for _, x := range w.list {
		if x.due.After(now) {
			live = append(live, x)
		}
	}
	clear(w.list[len(live):])
	w.list = append(live, delayedWake{due: now.Add(d), t: c.AfterFunc(d, notify)})
}

// stop disarms the delayed wake-ups; the source is closing.
func (w *delays) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, x := range w.list {
		x.t.Stop()
	}
	w.list = nil
}
