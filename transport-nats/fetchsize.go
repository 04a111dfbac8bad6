package natsjs

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/batching"
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
// the process dies. So a subscription starts at a fetch of its worker count and sizes each fetch
// as the SQL engine sizes its claims (package batching), by how fast the workers got through
// the last one, up to DefaultMaxFetch; a fetch that came back less than half full (the queue ran
// dry, the request expired) halves it too, down to the worker count. A FetchBatch is the same
// rule with the floor at the ceiling: it never moves. The fetch window (window.go) still bounds
// it after a start or a crash: one message at a time while suspect messages may come.

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

// flowWait bounds how long a pull request sent while messages flow (the last fetch came back
// full) waits on the server: if the flow stops, the request expires soon and the next asks for
// no more than the stream holds.
const flowWait = 100 * time.Millisecond

// fetchSize is how many messages the next pull request asks for, and how long it waits on the
// server: the fetch size, no more than the window's; while messages flow (the last fetch came
// back full), for up to flowWait; otherwise for FetchWait, and for no more messages than the
// stream holds for the consumer (at least one).
//
// The limit is for instances that compete on one consumer: when one dies, the messages it held
// come due after the AckWait and go into whichever pull request is open, up to its size. A
// subscription idle on a drained queue asks for one message, so they reach it one by one and
// the first (suspect) starts the window; one large open request would take them together, and a
// crash on one of them would charge the others a second delivery that no handler ran. While
// messages flow, a request for the whole size streams them to the workers as they are published
// (asking for the backlog alone, which is about zero when the workers keep up, cost a round trip
// per message: p50 latency 1.07 ms against 0.36 at 10,000 messages a second in BenchmarkLatency).
func (c *consumer) fetchSize() (int, time.Duration) {
	n, wait := min(c.win.batch(), int(c.size.Load())), c.cfg.fetchWait
	if c.flowing.Load() {
		wait = min(wait, flowWait)
	} else if b := c.backlog.Load(); b < int64(n) {
		n = int(b)
	}
	return max(n, 1), wait
}

// ackBatch is how many +ACKs make one write of unconfirmed acknowledgements: a fetch's worth.
func (c *consumer) ackBatch() int { return int(c.size.Load()) }

// adapt sizes the next fetch after f, whose messages have all been taken.
func (c *consumer) adapt(f *fetch) {
	if c.base == c.batch || f.asked < 1 {
		return // fixed
	}
	cur, got := int(c.size.Load()), int(f.got.Load())
	took := c.clock.Now().Sub(f.at)
	next := max(cur/2, c.base) // came back less than half full
	if got >= f.asked/2 {
		// A fetch the window held below the size says nothing of the workers' pace.
		next = batching.Next(cur, c.base, c.batch, got >= f.asked && f.asked >= cur, took)
	}
	if next != cur {
		c.size.Store(int32(next))
		c.log.Debug("nats: fetch size", "queue", c.queue, "from", cur, "to", next, "got", got, "took", took)
	}
}
