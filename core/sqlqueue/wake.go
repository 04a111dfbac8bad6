package sqlqueue

import (
	"sync"
)

// wakes is the process's registry of claimants waiting for rows: a Publisher wakes the
// claimants of its queue at once instead of letting them wait for their poll interval.
var wakes = &wakeHub{m: make(map[wakeKey]*wakeEntry)}

type wakeKey struct {
	db    DB
	queue QueueRef
}

type wakeHub struct {
	mu sync.Mutex
	m  map[wakeKey]*wakeEntry
}

// wakeEntry is one queue's wake-up: a channel closed (and replaced) on every notify.
type wakeEntry struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *wakeHub) entry(db DB, q QueueRef) *wakeEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := wakeKey{db: db, queue: q}
	e := h.m[k]
	if e == nil {
		e = &wakeEntry{ch: make(chan struct{})}
		h.m[k] = e
	}
	return e
}

// wait returns the channel the next notify closes; take it before looking for rows, so that a
// publish between the look and the wait is not missed.
func (e *wakeEntry) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ch
}

func (e *wakeEntry) notify() {
	e.mu.Lock()
	close(e.ch)
	e.ch = make(chan struct{})
	e.mu.Unlock()
}
