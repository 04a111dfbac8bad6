package natsjs

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
)

// strandedWatch is what a subscription's health check remembers of stranded messages (guarded
// by mu): the first stranded sequence the last check saw and when that check had read it, and
// the one it last logged.
type strandedWatch struct {
	mu     sync.Mutex
	seen   uint64
	seenAt time.Time
	logged uint64
}

// CheckHealth reports messages stranded in the queue's stream (core.HealthChecker; the App
// shows it in the subscription's health): warn, with the first stranded sequence and the
// consumer's ack floor in its state, when the stream holds a message of the queue's subject at
// or below the floor — one the consumer will not deliver again (Ops.ListStranded) — at this
// check and at the one before, which had finished before this one began (the server moves the
// floor just before it removes an acknowledged message: a message is stranded only if it is
// still there a check later). The first such check logs it once at warn level. A check costs
// two JetStream requests (the consumer's info, a direct get); while the connection is down it
// makes none, and one that fails reports nothing (the connection's own health says why).
func (c *consumer) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Status: core.HealthPass}
	if c.st == nil || c.st.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy || !c.nc.IsConnected() {
		return h // disconnected: the Conn's health says so, and a request would wait out the check
	}
	began := time.Now()
	ci, err := c.cons.Info(ctx)
	if err != nil {
		return h
	}
	floor := ci.AckFloor.Stream
	m, ok, err := firstStranded(ctx, c.st, c.cfg.subject, 1, floor)
	if err != nil {
		return h
	}
	w := &c.stranded
	w.mu.Lock()
	prev, prevAt := w.seen, w.seenAt
	w.seen, w.seenAt = 0, time.Now()
	if ok {
		w.seen = m.Sequence
	}
	if !ok || prev != m.Sequence || !prevAt.Before(began) {
		w.mu.Unlock()
		return h
	}
	log := w.logged != m.Sequence
	w.logged = m.Sequence
	w.mu.Unlock()
	id := msgID(m, c.cfg.stream)
	if log {
		c.log.Warn("nats: messages stranded in the stream: it holds messages of the queue at or below the consumer's ack floor, which it will not deliver again (a server crash lost their removal, or they reached MaxDeliver); settle stranded lists them and repairs moves them",
			"message_id", id, "stream", c.cfg.stream, "consumer", c.cfg.durable, "stream_seq", m.Sequence, "ack_floor", floor)
	}
	h.Status = core.HealthWarn
	h.State = "messages stranded (stream " + strconv.Quote(c.cfg.stream) + " holds sequence " + strconv.FormatUint(m.Sequence, 10) +
		" and maybe more at or below consumer " + strconv.Quote(c.cfg.durable) + "'s ack floor " + strconv.FormatUint(floor, 10) +
		": never delivered again; settle stranded repair moves them)"
	return h
}

var _ core.HealthChecker = (*consumer)(nil)
