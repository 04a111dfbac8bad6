package natsjs

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultMaxFetch is the most one pull request asks for when no FetchBatch is given: the
// ceiling of the automatic fetch size (lower when the consumer's MaxAckPending or
// MaxRequestBatch is).
const DefaultMaxFetch = 500

// The automatic fetch size (no FetchBatch).
//
// A pull request costs a round trip to the server, and one for a single message makes the
// round trip the rate: with one worker, about 7,000 messages a second on the machine of the
// bench module, against 70,000 for the same worker fetching 200 at a time. A fixed large batch,
// though, leaves many messages fetched and waiting beside slow handlers, each held (and
// extended) by this process while another instance may be idle, and each charged a delivery if
// the process dies. So, as the SQL queues size their claims, a subscription starts at a fetch of
// its worker count and sizes each fetch by how fast the workers got through the last one: a
// fetch that came back full and was handed out in less than fetchCycle makes the next one
// larger, towards what the workers get through in fetchCycle at the rate they just showed (at
// least double, at most maxFetchGrowth times), up to DefaultMaxFetch; one that took more than
// four times as long halves it, and so does one that came back less than half full (the queue
// ran dry, the request expired): down to the worker count. The fetch window (window.go) still
// bounds it after a start or a crash: one message at a time while suspect messages may come.
const (
	fetchCycle     = 100 * time.Millisecond
	maxFetchGrowth = 8
)

// autoCeiling is the automatic fetch size's ceiling on the consumer ci describes: DefaultMaxFetch,
// or lower: its MaxAckPending (the server would not deliver more) and its MaxRequestBatch (the
// server refuses a larger pull request).
func autoCeiling(ci *jetstream.ConsumerInfo) int {
	n := DefaultMaxFetch
	if ci == nil {
		return n
	}
	if m := ci.Config.MaxAckPending; m > 0 {
		n = min(n, m)
	}
	if m := ci.Config.MaxRequestBatch; m > 0 {
		n = min(n, m)
	}
	return n
}

// fetchSize is how many messages the next pull request asks for: the window's size, and no more
// than the automatic size.
func (c *consumer) fetchSize() int {
	n := c.win.batch()
	if c.auto {
		n = min(n, int(c.size.Load()))
	}
	return max(n, 1)
}

// ackBatch is how many +ACKs make one write of unconfirmed acknowledgements: a fetch's worth.
func (c *consumer) ackBatch() int {
	if c.auto {
		return int(c.size.Load())
	}
	return c.batch
}

// adapt sizes the next automatic fetch after f, whose messages have all been taken.
func (c *consumer) adapt(f *fetch) {
	if !c.auto || f.asked < 1 {
		return
	}
	cur, got := int(c.size.Load()), int(f.got.Load())
	took := c.clock.Now().Sub(f.at)
	next := cur
	switch {
	case got < f.asked/2 || took > 4*fetchCycle:
		next = max(cur/2, c.base)
	case got >= f.asked && f.asked >= cur && took < fetchCycle:
		grow := maxFetchGrowth
		if took > 0 {
			grow = min(max(int(fetchCycle/took), 2), maxFetchGrowth)
		}
		next = min(cur*grow, c.batch)
	}
	if next != cur {
		c.size.Store(int32(next))
		c.log.Debug("nats: fetch size", "queue", c.queue, "from", cur, "to", next, "got", got, "took", took)
	}
}
