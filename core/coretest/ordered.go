package coretest

// The in-memory broker's ordering (core.Ordered). Once an ordered subscription opens on a
// queue, the queue keeps one message of each ordering key — its head — ready, handed out or
// waiting for its retry-after; the key's later messages wait in its lane. The head goes back
// to the ready backlog when it is retried (at the tail: other keys take their turn) or abandoned
// (at the head), still holding its key; when it settles for good (ack, drop, dead letter) the
// next message of the lane becomes the head and joins the ready backlog at its tail. Claims
// therefore rotate over keys: a key with a long backlog has one message in the ready backlog
// at a time, and the others keep their turns. Every subscription of the queue, ordered or not,
// then takes the heads only.

import "slices"

// lane is a held key: the messages of the key waiting behind its head, in publish order.
type lane struct{ waiting []*Stored }

// queueBehind puts m, a fresh message of an ordered queue, in its key's lane when its key is
// held, and reports whether it did; otherwise m holds its key now (it goes to the ready
// backlog). b.mu is held.
func (q *memQueue) queueBehind(m *Stored) bool {
	if m.OrderingKey == "" {
		return false
	}
	if l := q.lanes[m.OrderingKey]; l != nil {
		l.waiting = append(l.waiting, m)
		return true
	}
	q.lanes[m.OrderingKey] = &lane{}
	return false
}

// orderLocked turns ordering on for q, moving each key's messages behind its first ready one
// into its lane; b.mu is held.
func (q *memQueue) orderLocked() {
	if q.ordered {
		return
	}
	q.ordered = true
	q.lanes = make(map[string]*lane)
	ready := q.ready[:0]
	for _, m := range q.ready {
		if !q.queueBehind(m) {
			ready = append(ready, m)
		}
	}
	clear(q.ready[len(ready):])
	q.ready = ready
}

// back returns the head of its key (a retried copy, an abandoned delivery) to the ready backlog.
func (b *Broker) back(name string, m *Stored, head bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue(name).backLocked(m, head)
}

// backLocked returns m, which holds its key on an ordered queue (or which has none), to the
// ready backlog; b.mu is held.
func (q *memQueue) backLocked(m *Stored, head bool) {
	q.readyLocked(m, head)
}

// settleKeyLocked releases the key of m, which settled for good: the next message of its lane
// becomes the head, ready at the tail of the backlog; b.mu is held.
func (q *memQueue) settleKeyLocked(m *Stored) {
	if !q.ordered || m.OrderingKey == "" {
		return
	}
	l := q.lanes[m.OrderingKey]
	if l == nil {
		return
	}
	if len(l.waiting) == 0 {
		delete(q.lanes, m.OrderingKey)
		return
	}
	next := l.waiting[0]
	l.waiting[0] = nil
	l.waiting = l.waiting[1:]
	q.readyLocked(next, false)
}

// waiting returns how many messages wait in lanes; b.mu is held.
func (q *memQueue) waiting() int {
	n := 0
	for _, l := range q.lanes {
		n += len(l.waiting)
	}
	return n
}

// appendWaiting appends the messages waiting in lanes to out, by key and in order within one,
// emptying the lanes with take (their keys are then free); b.mu is held.
func (q *memQueue) appendWaiting(out []Stored, take bool) []Stored {
	if len(q.lanes) == 0 {
		return out
	}
	keys := make([]string, 0, len(q.lanes))
	for k := range q.lanes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, m := range q.lanes[k].waiting {
			out = append(out, *m)
		}
		if take {
			q.lanes[k].waiting = nil
		}
	}
	return out
}
