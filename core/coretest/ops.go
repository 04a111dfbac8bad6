package coretest

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
)

// Ops returns the operations view (ops.Queue) of the in-memory queue named queue, whose dead
// letter is the queue dead ("" for none). Ready, in-flight and dead counts are exact; delays
// wait in the process for the whole broker and publish times are not kept, so Delayed and
// OldestReady are reported unmeasured. A dead letter's id is its message id; listing cursors
// are positions.
func (b *Broker) Ops(queue, dead string) ops.Queue { return &memOps{b: b, queue: queue, dead: dead} }

type memOps struct {
	b           *Broker
	queue, dead string
}

var _ ops.Queue = (*memOps)(nil)

func (o *memOps) Stats(context.Context) (ops.Stats, error) {
	b := o.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s := ops.Stats{Queue: o.queue, DeadLetter: o.dead, At: b.clock.Now().UTC(), Unmeasured: []ops.Unmeasured{
		{Figure: ops.FigureDelayed, Why: "the in-memory broker holds delayed copies in the process, for all its queues together"},
		{Figure: ops.FigureOldestReady, Why: "the in-memory broker keeps no publish time"},
	}}
	if q := b.queues[o.queue]; q != nil {
		s.Ready, s.InFlight = int64(len(q.ready)), int64(q.unacked)
	}
	if q := b.queues[o.dead]; q != nil && o.dead != "" {
		s.Dead = int64(len(q.ready))
	}
	return s, nil
}

func (o *memOps) deadLetter(m *Stored) ops.DeadLetter {
	d := ops.DeadLetter{ID: m.ID, Payload: m.Body, Headers: maps.Clone(m.Headers), Count: m.Attempt}
	_ = d.ReadHeaders() // a malformed header leaves its field as the broker knows it
	return d
}

func (o *memOps) ListDead(_ context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	if o.dead == "" {
		return ops.DeadPage{}, ops.ErrNoDeadLetter
	}
	start := 0
	if p.After != "" {
		n, err := strconv.Atoi(p.After)
		if err != nil || n < 0 {
			return ops.DeadPage{}, fmt.Errorf("coretest: listing cursor %q is not a position", p.After)
		}
		start = n
	}
	b := o.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var page ops.DeadPage
	q := b.queue(o.dead)
	for i := start; i < len(q.ready); i++ {
		d := o.deadLetter(q.ready[i])
		if !f.Match(d) {
			continue
		}
		if len(page.Items) == p.LimitOf() {
			page.Next = strconv.Itoa(i)
			break
		}
		page.Items = append(page.Items, d)
	}
	return page, nil
}

func (o *memOps) GetDead(_ context.Context, id string) (ops.DeadLetter, error) {
	if o.dead == "" {
		return ops.DeadLetter{}, ops.ErrNoDeadLetter
	}
	b := o.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.queue(o.dead).ready {
		if m.ID == id {
			return o.deadLetter(m), nil
		}
	}
	return ops.DeadLetter{}, &ops.NotFoundError{DeadLetter: "queue " + strconv.Quote(o.dead), IDs: []string{id}}
}

// take removes the selected dead letters (all of them, or none when an id is unknown).
func (o *memOps) take(s ops.Selection) ([]*Stored, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.dead == "" {
		return nil, ops.ErrNoDeadLetter
	}
	b := o.b
	q := b.queue(o.dead)
	found := map[string]bool{}
	var taken, kept []*Stored
	for _, m := range q.ready {
		if s.Match(o.deadLetter(m)) {
			taken, found[m.ID] = append(taken, m), true
		} else {
			kept = append(kept, m)
		}
	}
	var missing []string
	for _, id := range s.IDs {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, &ops.NotFoundError{DeadLetter: "queue " + strconv.Quote(o.dead), IDs: missing}
	}
	q.ready = kept
	return taken, nil
}

func (o *memOps) Redrive(_ context.Context, s ops.Selection, opt ops.RedriveOptions) (int, error) {
	b := o.b
	b.mu.Lock()
	taken, err := o.take(s)
	b.mu.Unlock()
	if err != nil {
		return 0, err
	}
	for _, m := range taken {
		d := o.deadLetter(m)
		c := &Stored{ID: m.ID, Body: m.Body, Headers: ops.RedriveHeaders(m.Headers, opt.KeepAttempts), Attempt: 1}
		if opt.KeepAttempts {
			c.Attempt = d.Count + 1
		}
		to := d.Origin
		if to == "" {
			to = o.queue
		}
		b.push(to, c, false)
	}
	return len(taken), nil
}

func (o *memOps) Purge(_ context.Context, s ops.Selection) (int, error) {
	b := o.b
	b.mu.Lock()
	defer b.mu.Unlock()
	taken, err := o.take(s)
	return len(taken), err
}

// PublishDead stores a dead letter in queue as a dead-letter move would: body, headers, and
// the final count (the settle-retry-count header when it carries one, else 1).
func (b *Broker) PublishDead(queue string, body []byte, headers map[string]string) string {
	id := strconv.FormatInt(b.nextID.Add(1), 10)
	n := 1
	if info, ok, _ := core.ParseDeadLetterInfo(headers); ok && info.Count > 0 {
		n = info.Count
	}
	b.push(queue, &Stored{ID: id, Body: body, Headers: maps.Clone(headers), Attempt: n}, false)
	return id
}
