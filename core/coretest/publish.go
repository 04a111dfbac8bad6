package coretest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Sender returns the queue's publishing side (core.Target): core.NewPublisher calls it.
func (e *Endpoint) Sender(ctx context.Context) (core.Sender, error) {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if e.b.closed {
		return nil, fmt.Errorf("in-memory queue %q: %w", e.name, core.ErrClosed)
	}
	return sender{e}, nil
}

type sender struct{ e *Endpoint }

func (s sender) Clock() clock.Clock { return s.e.b.clock }

// Send enqueues msgs in order under one lock: each is durable (as durable as memory is) when
// Send returns.
func (s sender) Send(ctx context.Context, msgs []core.Outgoing) []core.Receipt {
	rs := make([]core.Receipt, len(msgs))
	b := s.e.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, m := range msgs {
		switch {
		case ctx.Err() != nil:
			rs[i].Err = fmt.Errorf("in-memory queue %q: %w", s.e.name, ctx.Err())
		case b.closed:
			rs[i].Err = fmt.Errorf("in-memory queue %q: %w", s.e.name, core.ErrClosed)
		default:
			if err := m.Options.Unread("in-memory queue " + strconv.Quote(s.e.name)); err != nil {
				rs[i].Err = err
				continue
			}
			rs[i] = b.enqueueLocked(s.e.name, m)
		}
	}
	return rs
}

// enqueueLocked stores one published message on the named queue; b.mu is held.
func (b *Broker) enqueueLocked(name string, m core.Outgoing) core.Receipt {
	q := b.queue(name)
	if m.DedupKey != "" {
		if id, ok := q.pending[m.DedupKey]; ok {
			return core.Receipt{ID: id, Duplicate: true}
		}
	}
	id := m.ID
	if id == "" {
		id = strconv.FormatInt(b.nextID.Add(1), 10)
	}
	now := b.clock.Now()
	s := &Stored{ID: id, Body: m.Body, Headers: m.Headers, Attempt: 1, EnqueuedAt: now,
		ContentType: m.ContentType, CorrelationID: m.CorrelationID, OrderingKey: m.OrderingKey,
		DedupKey: m.DedupKey, Priority: m.Priority, NotBefore: m.NotBefore}
	if m.DedupKey != "" {
		if q.pending == nil {
			q.pending = make(map[string]string)
		}
		q.pending[m.DedupKey] = id
	}
	if !m.NotBefore.After(now) {
		b.pushLocked(name, s, false)
		return core.Receipt{ID: id}
	}
	if q.held == nil {
		q.held = make(map[*Stored]clock.Timer)
	}
	q.held[s] = b.clock.AfterFunc(m.NotBefore.Sub(now), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := q.held[s]; ok { // not dropped by Close
			delete(q.held, s)
			b.pushLocked(name, s, false)
		}
	})
	return core.Receipt{ID: id}
}

// release frees the dedup key of m, which is no longer pending on q.
func (q *memQueue) release(m *Stored) {
	if m.DedupKey != "" && q.pending[m.DedupKey] == m.ID {
		delete(q.pending, m.DedupKey)
	}
}

// Scheduled returns a snapshot of the messages of a queue that wait for their NotBefore, the
// earliest first.
func (b *Broker) Scheduled(queue string) []Stored {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return nil
	}
	out := make([]Stored, 0, len(q.held))
	for m := range q.held {
		out = append(out, *m)
	}
	slices.SortStableFunc(out, func(a, b Stored) int { return a.NotBefore.Compare(b.NotBefore) })
	return out
}

// RequirePublished fails t unless exactly one message on the in-memory queue — ready, or waiting
// for its NotBefore — decodes as a T that match accepts (nil accepts any), and returns it: a
// one-line assertion that the code under test published a message.
//
//	coretest.RequirePublished(t, broker, "payouts", func(p Payout) bool { return p.Refund == "r-1" })
//
// A message published with core.Raw's content type is decoded with core.Raw, any other with
// core.JSON.
func RequirePublished[T any](t testing.TB, b *Broker, queue string, match func(T) bool) Stored {
	t.Helper()
	all := append(b.Messages(queue), b.Scheduled(queue)...)
	var found []Stored
	for _, m := range all {
		var v T
		codec := core.JSON
		if m.ContentType == core.Raw.ContentType() {
			codec = core.Raw
		}
		if codec.Unmarshal(m.Body, &v) != nil {
			continue
		}
		if match == nil || match(v) {
			found = append(found, m)
		}
	}
	what := fmt.Sprintf("%T", *new(T))
	switch len(found) {
	case 1:
		return found[0]
	case 0:
		t.Fatalf("coretest.RequirePublished: queue %q holds %d messages, none a %s that matches%s", queue, len(all), what, bodies(all))
	default:
		t.Fatalf("coretest.RequirePublished: queue %q holds %d messages that are a %s that matches, want exactly one%s", queue, len(found), what, bodies(found))
	}
	return Stored{}
}

// bodies lists up to five messages' bodies for a failure message.
func bodies(ms []Stored) string {
	var sb strings.Builder
	for i, m := range ms {
		if i == 5 {
			fmt.Fprintf(&sb, "\n\t… and %d more", len(ms)-5)
			break
		}
		body := string(m.Body)
		if len(body) > 120 {
			body = body[:120] + "…"
		}
		fmt.Fprintf(&sb, "\n\t%s: %s", m.ID, body)
	}
	return sb.String()
}
