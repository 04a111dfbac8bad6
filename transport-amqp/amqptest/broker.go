package amqptest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rabbitmq/amqp091-go"

	amqp "github.com/settlehq/settle/transport-amqp"

	"github.com/settlehq/settle/core/clock"
)

// Broker is an in-process RabbitMQ. It keeps exchanges, queues, bindings and messages in
// memory and takes its time from a clock.Clock, so that message TTLs and delayed-message
// exchanges release messages when a virtual clock is advanced. All state sits behind one
// mutex; deliveries reach consumers through per-consumer buffers, so the broker never waits
// for a reader.
//
// The broker arms at most one timer on its clock at a time (for the earliest TTL expiry or
// delayed release), which tests counting timers with clock.Virtual.BlockUntil must allow for.
type Broker struct {
	clk clock.Clock
	dme bool

	mu        sync.Mutex
	exchanges map[string]*exchange
	queues    map[string]*queue
	conns     map[*connection]struct{}
	delayed   []*heldMessage // ordered by due time, then arrival
	seq       uint64         // message positions and generated names
	timer     clock.Timer
	timerAt   time.Time
	timerGen  uint64
}

// Option configures a Broker.
type Option func(*Broker)

// WithoutDelayedMessagePlugin makes the broker behave like a RabbitMQ without the
// rabbitmq_delayed_message_exchange plugin: declaring an exchange of type x-delayed-message
// closes the connection with 503 COMMAND_INVALID, as the real server does.
func WithoutDelayedMessagePlugin() Option { return func(b *Broker) { b.dme = false } }

// NewBroker returns an empty broker (with the default exchange and the amq.* exchanges) that
// reads time from clk.
func NewBroker(clk clock.Clock, opts ...Option) *Broker {
	b := &Broker{
		clk:       clk,
		dme:       true,
		exchanges: map[string]*exchange{},
		queues:    map[string]*queue{},
		conns:     map[*connection]struct{}{},
	}
	for _, o := range opts {
		o(b)
	}
	for name, kind := range map[string]string{
		"": "direct", "amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic",
		"amq.headers": "headers", "amq.match": "headers",
	} {
		b.exchanges[name] = &exchange{name: name, kind: kind, durable: true}
	}
	return b
}

// Dial opens a connection to the broker.
func (b *Broker) Dial() (amqp.Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &connection{b: b, channels: map[*channel]struct{}{}}
	b.conns[c] = struct{}{}
	return c, nil
}

// CloseAllConnections does what `rabbitmqctl close_all_connections` does: every connection is
// closed by the server with 320 CONNECTION_FORCED; each of its channels and the connection
// itself report that error to their NotifyClose listeners, and unacknowledged deliveries return
// to their queues.
func (b *Broker) CloseAllConnections() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	err := serverError(amqp091.ConnectionForced, "Closed via amqptest.Broker.CloseAllConnections")
	for c := range b.conns {
		b.closeConnection(c, err)
	}
	b.dispatchAll()
	b.rearm()
}

// QueueInfo describes a queue as the management tools would show it.
type QueueInfo struct {
	Name       string
	Type       string // "classic" or "quorum"
	Durable    bool
	AutoDelete bool
	Exclusive  bool
	Args       amqp091.Table
	Ready      int // messages waiting for a consumer
	Unacked    int // messages delivered and not yet settled
	// DeadLettering counts dead letters a quorum queue dead-lettering at-least-once keeps
	// because their destination refused them (no route, a full queue): in the queue, neither
	// ready nor delivered.
	DeadLettering int
	Consumers     int
}

// Queue describes the named queue; ok is false when it does not exist. Messages whose TTL ran
// out by the clock's current time have already been expired.
func (b *Broker) Queue(name string) (info QueueInfo, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	b.rearm()
	q := b.queues[name]
	if q == nil {
		return QueueInfo{}, false
	}
	typ := "classic"
	if q.quorum {
		typ = "quorum"
	}
	return QueueInfo{
		Name: q.name, Type: typ, Durable: q.durable, AutoDelete: q.autoDelete, Exclusive: q.exclusive,
		Args: normalize(q.args), Ready: len(q.ready), Unacked: q.unacked, DeadLettering: len(q.dlPending),
		Consumers: len(q.consumers),
	}, true
}

// QueueCounts counts the named queue's messages as RabbitMQ's management API does
// (amqp.QueueCounter): ready, unacknowledged, and in all, dead letters an at-least-once quorum
// queue keeps included.
func (b *Broker) QueueCounts(_ context.Context, queue string) (amqp.QueueCounts, error) {
	info, ok := b.Queue(queue)
	if !ok {
		return amqp.QueueCounts{}, fmt.Errorf("amqptest: no queue %q", queue)
	}
	return amqp.QueueCounts{Messages: int64(info.Ready + info.Unacked + info.DeadLettering), Ready: int64(info.Ready),
		Unacknowledged: int64(info.Unacked)}, nil
}

var _ amqp.QueueCounter = (*Broker)(nil)

// QueueArgs returns the arguments the named queue was declared with, or nil when it does not
// exist.
func (b *Broker) QueueArgs(name string) amqp091.Table {
	info, _ := b.Queue(name)
	return info.Args
}

// Messages returns the ready messages of the named queue, head first, as a consumer would
// receive them next (without delivery tag or acknowledger). Unacknowledged messages are not
// included; Queue reports how many there are. The result is nil when the queue does not exist.
func (b *Broker) Messages(name string) []amqp091.Delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	b.rearm()
	q := b.queues[name]
	if q == nil {
		return nil
	}
	out := make([]amqp091.Delivery, 0, len(q.ready))
	for _, m := range q.ready {
		out = append(out, m.delivery(q, false))
	}
	return out
}

// Held returns how many messages the named x-delayed-message exchange is holding back.
func (b *Broker) Held(exchange string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	b.rearm()
	n := 0
	for _, h := range b.delayed {
		if h.exchange == exchange {
			n++
		}
	}
	return n
}

// heldMessage is a message an x-delayed-message exchange holds until due.
type heldMessage struct {
	due      time.Time
	seq      uint64
	exchange string
	key      string
	msg      *message
}

func (b *Broker) nextSeq() uint64 {
	b.seq++
	return b.seq
}

// publish routes msg through the named exchange at time at (the exchange exists). routed is
// false when no queue took it at publishing time: none matched, or the x-delayed-message
// exchange held it (the plugin routes only when the delay is over, so RabbitMQ returns every
// mandatory publishing it holds). refused is true when a queue matched but refused it
// (x-overflow reject-publish at x-max-length): the publisher's confirmation is then a nack.
func (b *Broker) publish(ex *exchange, key string, msg *message, at time.Time) (routed, refused bool) {
	if ex.kind == "x-delayed-message" {
		if v, ok := msg.pub.Headers["x-delay"]; ok {
			if d, ok := asInt(v); ok && d > 0 {
				h := &heldMessage{due: at.Add(time.Duration(d) * time.Millisecond), seq: b.nextSeq(), exchange: ex.name, key: key, msg: msg}
				i, _ := slices.BinarySearchFunc(b.delayed, h, func(a, t *heldMessage) int {
					if c := a.due.Compare(t.due); c != 0 {
						return c
					}
					return int(a.seq) - int(t.seq)
				})
				b.delayed = slices.Insert(b.delayed, i, h)
				return false, false
			}
		}
	}
	msg.exchange = ex.name
	msg.routingKey = key
	targets := b.route(ex, key, msg.pub.Headers)
	for _, q := range targets {
		if q.full() {
			refused = true
			if q.overflow == "reject-publish-dlx" {
				b.deadLetter(q, msg.clone(), "maxlen", at)
			}
			continue
		}
		b.enqueue(q, msg.clone(), at)
	}
	return len(targets) > 0, refused
}

// release routes a held message once its delay has passed. The plugin negates x-delay on the
// way out, keeping its type.
func (b *Broker) release(h *heldMessage) {
	ex := b.exchanges[h.exchange]
	if ex == nil {
		return
	}
	if v, ok := h.msg.pub.Headers["x-delay"]; ok {
		h.msg.pub.Headers["x-delay"] = negate(v)
	}
	h.msg.exchange = ex.name
	h.msg.routingKey = h.key
	for _, q := range b.route(ex, h.key, h.msg.pub.Headers) {
		if !q.full() {
			b.enqueue(q, h.msg.clone(), h.due)
		}
	}
}

func negate(v any) any {
	switch v := v.(type) {
	case int8:
		return -v
	case int16:
		return -v
	case int32:
		return -v
	case int64:
		return -v
	}
	return v
}

// route returns the queues a message published to ex with key reaches, each once.
func (b *Broker) route(ex *exchange, key string, headers amqp091.Table) []*queue {
	if ex.name == "" {
		if q := b.queues[key]; q != nil {
			return []*queue{q}
		}
		return nil
	}
	kind := ex.kind
	if kind == "x-delayed-message" {
		kind = ex.delayedType
	}
	var out []*queue
	for _, bd := range ex.bindings {
		if !matches(kind, bd, key, headers) {
			continue
		}
		if q := b.queues[bd.queue]; q != nil && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// enqueue appends a message to a queue at time at, computing its expiry from the queue's
// x-message-ttl and the message's expiration, whichever is shorter.
func (b *Broker) enqueue(q *queue, m *message, at time.Time) {
	m.seq = b.nextSeq()
	m.expiring = false
	ttl, has := q.ttl, q.hasTTL
	if m.pub.Expiration != "" {
		ms, _ := strconv.ParseInt(m.pub.Expiration, 10, 64)
		if d := time.Duration(ms) * time.Millisecond; !has || d < ttl {
			ttl, has = d, true
		}
	}
	if has {
		m.expiring = true
		m.expires = at.Add(ttl)
	}
	q.ready = append(q.ready, m)
	// x-overflow drop-head (the default): the oldest ready messages make room, dead-lettered
	// with reason maxlen.
	for q.hasMaxLen && q.overflow == "drop-head" && int64(len(q.ready)) > q.maxLen {
		head := q.ready[0]
		q.ready = q.ready[1:]
		b.deadLetter(q, head, "maxlen", at)
	}
}

// sweep performs, in time order, every expiry and delayed release due by the clock's current
// time, each at its own due time.
func (b *Broker) sweep() {
	now := b.clk.Now()
	for {
		var (
			due   time.Time
			found bool
			headQ *queue
		)
		for _, q := range b.queues {
			if len(q.ready) == 0 || !q.ready[0].expiring {
				continue
			}
			e := q.ready[0].expires
			if e.After(now) {
				continue
			}
			if !found || e.Before(due) || (e.Equal(due) && q.name < headQ.name) {
				due, found, headQ = e, true, q
			}
		}
		if len(b.delayed) > 0 && !b.delayed[0].due.After(now) && (!found || b.delayed[0].due.Before(due)) {
			h := b.delayed[0]
			b.delayed = b.delayed[1:]
			b.release(h)
			continue
		}
		if !found {
			break
		}
		m := headQ.ready[0]
		headQ.ready = headQ.ready[1:]
		b.deadLetter(headQ, m, "expired", due)
	}
	b.dispatchAll()
}

// rearm points the broker's single timer at the earliest future event.
func (b *Broker) rearm() {
	var next time.Time
	found := false
	for _, q := range b.queues {
		if len(q.ready) > 0 && q.ready[0].expiring && (!found || q.ready[0].expires.Before(next)) {
			next, found = q.ready[0].expires, true
		}
	}
	if len(b.delayed) > 0 && (!found || b.delayed[0].due.Before(next)) {
		next, found = b.delayed[0].due, true
	}
	if b.timer != nil {
		if found && b.timerAt.Equal(next) {
			return
		}
		b.timer.Stop()
		b.timer = nil
	}
	if !found {
		return
	}
	b.timerAt = next
	b.timerGen++
	gen := b.timerGen
	b.timer = b.clk.AfterFunc(next.Sub(b.clk.Now()), func() { b.onTimer(gen) })
}

func (b *Broker) onTimer(gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen == b.timerGen {
		b.timer = nil
	}
	b.sweep()
	b.rearm()
}

// deadLetter moves a message out of q for reason ("expired", "rejected", "delivery_limit") at
// time at, through the queue's dead-letter exchange, writing x-death the way RabbitMQ 3.10's
// rabbit_dead_letter does. Without a dead-letter exchange the message is dropped; when the
// exchange does not exist, or routes it to no queue or to a full one, it is dropped too, unless
// q dead-letters at-least-once: then q keeps it (not ready, not delivered; QueueInfo's
// DeadLettering) until every target takes it.
func (b *Broker) deadLetter(q *queue, m *message, reason string, at time.Time) {
	if !q.hasDLX {
		return
	}
	if b.exchanges[q.dlx] == nil && !q.atLeastOnce() {
		return
	}
	routingKeys := []string{m.routingKey}
	key := m.routingKey
	if q.hasDLRK {
		key = q.dlrk
	}
	headers := normalize(m.pub.Headers)
	if headers == nil {
		headers = amqp091.Table{}
	}
	keys := make([]any, len(routingKeys))
	for i, k := range routingKeys {
		keys[i] = k
	}
	info := amqp091.Table{
		"reason":       reason,
		"queue":        q.name,
		"time":         time.Unix(at.Unix(), 0),
		"exchange":     m.exchange,
		"routing-keys": keys,
	}
	if m.pub.Expiration != "" {
		info["original-expiration"] = m.pub.Expiration
	}
	deaths, ok := headers["x-death"].([]any)
	if !ok {
		info["count"] = int64(1)
		headers["x-death"] = []any{info}
		headers["x-first-death-reason"] = reason
		headers["x-first-death-queue"] = q.name
		headers["x-first-death-exchange"] = m.exchange
	} else {
		// One entry per (queue, reason): a repeat raises its count and moves it to the front,
		// keeping the rest of the first entry (time included).
		var others []any
		var match amqp091.Table
		for _, d := range deaths {
			t, isTable := d.(amqp091.Table)
			if isTable && match == nil && t["queue"] == q.name && t["reason"] == reason {
				match = t
				continue
			}
			others = append(others, d)
		}
		if match != nil {
			n, _ := asInt(match["count"])
			match["count"] = int64(n + 1)
			info = match
		} else {
			info["count"] = int64(1)
		}
		headers["x-death"] = append([]any{info}, others...)
	}
	dl := &message{pub: m.pub, exchange: q.dlx, routingKey: key}
	dl.pub.Headers = headers
	dl.pub.Expiration = ""
	if !b.routeDead(q, dl, reason, at) && q.atLeastOnce() {
		q.dlPending = append(q.dlPending, pendingDead{m: dl, reason: reason})
	}
}

// routeDead routes the dead letter m of q (its exchange and routing key already the dead-letter
// route's) and reports whether every queue it reached took it. At-most-once (RabbitMQ's
// default), a target that refuses it (full under reject-publish) or a route to no queue loses
// it. At-least-once (atLeastOnce), the caller keeps it in q when not every target took it, and
// retryDead routes it again later; nothing is enqueued until all targets have room.
func (b *Broker) routeDead(q *queue, m *message, reason string, at time.Time) bool {
	ex := b.exchanges[m.exchange]
	if ex == nil {
		return false
	}
	var targets []*queue
	for _, t := range b.route(ex, m.routingKey, m.pub.Headers) {
		if reason != "rejected" && isCycle(t.name, m.pub.Headers["x-death"].([]any)) {
			// RabbitMQ drops a message that would go round a dead-letter cycle with no
			// rejection in it.
			continue
		}
		if t.full() && q.atLeastOnce() {
			return false
		}
		if !t.full() {
			targets = append(targets, t)
		}
	}
	for _, t := range targets {
		b.enqueue(t, m.clone(), at)
	}
	return len(targets) > 0
}

// retryDead routes again the dead letters that quorum queues dead-lettering at-least-once keep
// because their targets refused them. RabbitMQ's dead-letter worker tries again on a timer of
// minutes; amqptest tries after every operation.
func (b *Broker) retryDead() {
	now := b.clk.Now()
	for _, q := range b.queues {
		if len(q.dlPending) == 0 {
			continue
		}
		keep := q.dlPending[:0]
		for _, p := range q.dlPending {
			if !b.routeDead(q, p.m, p.reason, now) {
				keep = append(keep, p)
			}
		}
		clear(q.dlPending[len(keep):])
		q.dlPending = keep
	}
}

// isCycle is rabbit_dead_letter:is_cycle/2: the target queue appears in x-death and no entry
// up to and including it was a rejection.
func isCycle(target string, deaths []any) bool {
	for _, d := range deaths {
		t, ok := d.(amqp091.Table)
		if !ok || t["reason"] == "rejected" {
			return false
		}
		if t["queue"] == target {
			return true
		}
	}
	return false
}

// dispatchAll hands ready messages to consumers with room, on every queue.
func (b *Broker) dispatchAll() {
	b.retryDead()
	for _, q := range b.queues {
		b.dispatch(q)
	}
}

// dispatch hands q's ready messages to its consumers, round-robin, while one has room.
func (b *Broker) dispatch(q *queue) {
	for len(q.ready) > 0 && len(q.consumers) > 0 {
		n := len(q.consumers)
		var c *consumer
		for i := range n {
			cand := q.consumers[(q.rr+i)%n]
			if cand.hasRoom() {
				c = cand
				q.rr = (q.rr + i + 1) % n
				break
			}
		}
		if c == nil {
			return
		}
		m := q.ready[0]
		q.ready = q.ready[1:]
		c.ch.deliver(q, m, c)
	}
}

// genName returns a server-generated name such as amq.gen-… or amq.ctag-….
func (b *Broker) genName(prefix string) string {
	return fmt.Sprintf("%s-amqptest%014d", prefix, b.nextSeq())
}

// exchange is a declared exchange and its bindings.
type exchange struct {
	name, kind                    string
	durable, autoDelete, internal bool
	args                          amqp091.Table
	delayedType                   string
	bindings                      []binding
}

type binding struct {
	queue, key string
	args       amqp091.Table
}

// matches reports whether a binding of an exchange of the given kind routes key/headers.
func matches(kind string, bd binding, key string, headers amqp091.Table) bool {
	switch kind {
	case "direct":
		return bd.key == key
	case "fanout":
		return true
	case "topic":
		return topicMatch(strings.Split(bd.key, "."), strings.Split(key, "."))
	case "headers":
		return headersMatch(bd.args, headers)
	}
	return false
}

// topicMatch matches routing-key words against a pattern where * is one word and # is zero or
// more.
func topicMatch(pattern, words []string) bool {
	if len(pattern) == 0 {
		return len(words) == 0
	}
	switch pattern[0] {
	case "#":
		for i := 0; i <= len(words); i++ {
			if topicMatch(pattern[1:], words[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(words) > 0 && topicMatch(pattern[1:], words[1:])
	}
	return len(words) > 0 && words[0] == pattern[0] && topicMatch(pattern[1:], words[1:])
}

// headersMatch implements the headers exchange: x-match all (default) or any over the
// binding's arguments that do not start with "x-"; a void binding value matches on presence.
func headersMatch(args, headers amqp091.Table) bool {
	matchAny := args["x-match"] == "any"
	checked := 0
	for k, want := range args {
		if strings.HasPrefix(k, "x-") {
			continue
		}
		checked++
		got, ok := headers[k]
		hit := ok && (want == nil || equalValues(want, got))
		if matchAny && hit {
			return true
		}
		if !matchAny && !hit {
			return false
		}
	}
	return !matchAny || checked == 0
}
