package amqptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rabbitmq/amqp091-go"

	amqp "github.com/settlehq/settle/transport-amqp"
)

// connection is a client connection to the broker.
type connection struct {
	b        *Broker
	closed   bool
	channels map[*channel]struct{}
	closes   []chan *amqp091.Error
}

var _ amqp.Connection = (*connection)(nil)

func (c *connection) Channel() (amqp.Channel, error) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		return nil, amqp091.ErrClosed
	}
	ch := &channel{b: c.b, conn: c, consumers: map[string]*consumer{}}
	c.channels[ch] = struct{}{}
	return ch, nil
}

func (c *connection) NotifyClose(receiver chan *amqp091.Error) chan *amqp091.Error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		close(receiver)
		return receiver
	}
	c.closes = append(c.closes, receiver)
	return receiver
}

func (c *connection) Close() error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return amqp091.ErrClosed
	}
	b.sweep()
	b.closeConnection(c, nil)
	b.dispatchAll()
	b.rearm()
	return nil
}

func (c *connection) IsClosed() bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.closed
}

// closeConnection closes c and its channels, with err from the server or nil for a client
// close, and deletes the exclusive queues it owned.
func (b *Broker) closeConnection(c *connection, err *amqp091.Error) {
	if c.closed {
		return
	}
	for ch := range c.channels {
		b.closeChannel(ch, err)
	}
	c.closed = true
	delete(b.conns, c)
	for _, q := range b.queues {
		if q.owner == c {
			b.deleteQueue(q)
		}
	}
	notify(c.closes, err, err != nil)
	c.closes = nil
}

// channel is one AMQP channel on a connection.
type channel struct {
	b      *Broker
	conn   *connection
	closed bool

	nextTag        uint64
	unacked        []*pending // ordered by delivery tag
	consumers      map[string]*consumer
	cancelled      []*consumer // cancelled, perhaps still handing over deliveries
	prefetch       int         // for consumers started from now on (basic.qos global=false)
	globalPrefetch int         // for the whole channel (basic.qos global=true)

	confirming bool
	published  uint64
	confirms   []*pipe[amqp091.Confirmation]
	returns    []*pipe[amqp091.Return]
	cancels    []*pipe[string]
	closes     []chan *amqp091.Error
}

var _ amqp.Channel = (*channel)(nil)

// pending is a delivery awaiting settlement.
type pending struct {
	tag uint64
	q   *queue
	m   *message
	c   *consumer // nil for basic.get
}

// consumer is a basic.consume subscription.
type consumer struct {
	tag       string
	ch        *channel
	q         *queue
	autoAck   bool
	exclusive bool
	prefetch  int
	unacked   int
	pipe      *pipe[amqp091.Delivery]
}

func (c *consumer) hasRoom() bool {
	if c.autoAck {
		return true
	}
	if c.prefetch > 0 && c.unacked >= c.prefetch {
		return false
	}
	return c.ch.globalPrefetch == 0 || len(c.ch.unacked) < c.ch.globalPrefetch
}

// begin locks the broker for an operation on ch, performing due expiries first. It returns
// false (and unlocks) when the channel is closed.
func (ch *channel) begin() bool {
	ch.b.mu.Lock()
	if ch.closed {
		ch.b.mu.Unlock()
		return false
	}
	ch.b.sweep()
	return true
}

// end dispatches what the operation made deliverable, rearms the timer and unlocks.
func (ch *channel) end() {
	ch.b.dispatchAll()
	ch.b.rearm()
	ch.b.mu.Unlock()
}

// fail closes the channel with a server error and returns it.
func (ch *channel) fail(err *amqp091.Error) *amqp091.Error {
	if isSoft(err.Code) {
		ch.b.closeChannel(ch, err)
	} else {
		ch.b.closeConnection(ch.conn, err)
	}
	return err
}

// closeChannel closes ch: consumers are cancelled, unacknowledged deliveries return to their
// queues in delivery-tag order, listeners are told.
func (b *Broker) closeChannel(ch *channel, err *amqp091.Error) {
	if ch.closed {
		return
	}
	ch.closed = true
	delete(ch.conn.channels, ch)
	now := b.clk.Now()
	unacked := ch.unacked
	ch.unacked = nil
	for _, p := range unacked {
		p.q.unacked--
		b.requeue(p.q, p.m, now, true)
	}
	for _, c := range ch.consumers {
		b.removeConsumer(c)
	}
	ch.consumers = nil
	for _, c := range ch.cancelled {
		c.pipe.stop() // drops what a cancelled consumer had not yet handed over
	}
	ch.cancelled = nil
	for _, p := range ch.confirms {
		p.stop()
	}
	for _, p := range ch.returns {
		p.stop()
	}
	ch.returns = nil
	for _, p := range ch.cancels {
		p.stop()
	}
	notify(ch.closes, err, err != nil)
	ch.closes = nil
}

func (ch *channel) ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, durable, autoDelete, internal, args, false)
}

func (ch *channel) ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, durable, autoDelete, internal, args, true)
}

func (ch *channel) exchangeDeclare(name, kind string, durable, autoDelete, internal bool, args amqp091.Table, passive bool) error {
	if err := args.Validate(); err != nil {
		return err
	}
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	b := ch.b
	if passive {
		if b.exchanges[name] == nil {
			return ch.fail(noExchange(name))
		}
		return nil
	}
	if name == "" {
		return ch.fail(defaultExchangeRefused())
	}
	if !b.knownType(kind) {
		return ch.fail(serverError(amqp091.CommandInvalid, "unknown exchange type '%s'", kind))
	}
	what := fmt.Sprintf("exchange '%s' in vhost '/'", name)
	if ex := b.exchanges[name]; ex != nil {
		for _, f := range []struct {
			key           string
			current, recv any
		}{
			{"type", ex.kind, kind},
			{"durable", ex.durable, durable},
			{"auto_delete", ex.autoDelete, autoDelete},
			{"internal", ex.internal, internal},
		} {
			if f.current != f.recv {
				return ch.fail(serverError(amqp091.PreconditionFailed, "inequivalent arg '%s' for %s: received '%v' but current is '%v'", f.key, what, f.recv, f.current))
			}
		}
		if msg := argEquivalence(ex.args, args, []string{"alternate-exchange", "x-delayed-type"}, what); msg != "" {
			return ch.fail(serverError(amqp091.PreconditionFailed, "%s", msg))
		}
		return nil
	}
	if strings.HasPrefix(name, "amq.") {
		return ch.fail(serverError(amqp091.AccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", name))
	}
	ex := &exchange{name: name, kind: kind, durable: durable, autoDelete: autoDelete, internal: internal, args: normalize(args)}
	if kind == "x-delayed-message" {
		t, _ := args["x-delayed-type"].(string)
		if t == "x-delayed-message" || !b.knownType(t) {
			return ch.fail(serverError(amqp091.PreconditionFailed, "Invalid argument, 'x-delayed-type' must be an existing exchange type"))
		}
		ex.delayedType = t
	}
	b.exchanges[name] = ex
	return nil
}

func (b *Broker) knownType(kind string) bool {
	switch kind {
	case "direct", "fanout", "topic", "headers":
		return true
	case "x-delayed-message":
		return b.dme
	}
	return false
}

func (ch *channel) ExchangeDelete(name string, ifUnused, noWait bool) error {
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	if name == "" {
		return ch.fail(defaultExchangeRefused())
	}
	ex := ch.b.exchanges[name]
	if ex == nil {
		return nil
	}
	if ifUnused && len(ex.bindings) > 0 {
		return ch.fail(serverError(amqp091.PreconditionFailed, "exchange '%s' in vhost '/' in use", name))
	}
	delete(ch.b.exchanges, name)
	return nil
}

func (ch *channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, durable, autoDelete, exclusive, args, false)
}

func (ch *channel) QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, durable, autoDelete, exclusive, args, true)
}

func (ch *channel) queueDeclare(name string, durable, autoDelete, exclusive bool, args amqp091.Table, passive bool) (amqp091.Queue, error) {
	if err := args.Validate(); err != nil {
		return amqp091.Queue{}, err
	}
	if !ch.begin() {
		return amqp091.Queue{}, amqp091.ErrClosed
	}
	defer ch.end()
	b := ch.b
	if passive {
		q := b.queues[name]
		if q == nil {
			return amqp091.Queue{}, ch.fail(noQueue(name))
		}
		if q.owner != nil && q.owner != ch.conn {
			return amqp091.Queue{}, ch.fail(locked(name))
		}
		return amqp091.Queue{Name: name, Messages: len(q.ready), Consumers: len(q.consumers)}, nil
	}
	if name == "" {
		name = b.genName("amq.gen")
	} else if strings.HasPrefix(name, "amq.") {
		return amqp091.Queue{}, ch.fail(serverError(amqp091.AccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", name))
	}
	what := fmt.Sprintf("queue '%s' in vhost '/'", name)
	if q := b.queues[name]; q != nil {
		if (q.owner != nil && q.owner != ch.conn) || (q.owner == nil && exclusive) {
			return amqp091.Queue{}, ch.fail(locked(name))
		}
		if q.durable != durable {
			return amqp091.Queue{}, ch.fail(serverError(amqp091.PreconditionFailed, "inequivalent arg 'durable' for %s: received '%v' but current is '%v'", what, durable, q.durable))
		}
		if q.autoDelete != autoDelete {
			return amqp091.Queue{}, ch.fail(serverError(amqp091.PreconditionFailed, "inequivalent arg 'auto_delete' for %s: received '%v' but current is '%v'", what, autoDelete, q.autoDelete))
		}
		// A classic queue declared without x-queue-type equals one declared as classic.
		current, received := withoutClassic(q.args), withoutClassic(args)
		keys := classicEquivalenceKeys
		if q.quorum {
			keys = quorumEquivalenceKeys
		}
		if msg := argEquivalence(current, received, keys, what); msg != "" {
			return amqp091.Queue{}, ch.fail(serverError(amqp091.PreconditionFailed, "%s", msg))
		}
		return amqp091.Queue{Name: name, Messages: len(q.ready), Consumers: len(q.consumers)}, nil
	}
	q, err := newQueue(name, durable, autoDelete, exclusive, args, what)
	if err != nil {
		return amqp091.Queue{}, ch.fail(err)
	}
	if exclusive {
		q.owner = ch.conn
	}
	b.queues[name] = q
	return amqp091.Queue{Name: name}, nil
}

func withoutClassic(t amqp091.Table) amqp091.Table {
	if t["x-queue-type"] != "classic" {
		return t
	}
	c := make(amqp091.Table, len(t))
	for k, v := range t {
		if k != "x-queue-type" {
			c[k] = v
		}
	}
	return c
}

// newQueue validates a new queue's arguments as RabbitMQ 3.10 does and builds it.
func newQueue(name string, durable, autoDelete, exclusive bool, args amqp091.Table, what string) (*queue, *amqp091.Error) {
	invalidArg := func(key, format string, a ...any) *amqp091.Error {
		return serverError(amqp091.PreconditionFailed, "invalid arg '%s' for %s: %s", key, what, fmt.Sprintf(format, a...))
	}
	q := &queue{name: name, durable: durable, autoDelete: autoDelete, exclusive: exclusive, args: normalize(args)}
	if v, ok := args["x-queue-type"]; ok {
		switch v {
		case "classic":
		case "quorum":
			q.quorum = true
		default:
			return nil, invalidArg("x-queue-type", "\"unsupported queue type '%s'\"", formatValue(v))
		}
	}
	if q.quorum {
		for _, p := range []struct {
			bad  bool
			name string
		}{{!durable, "non-durable"}, {autoDelete, "auto-delete"}, {exclusive, "exclusive-owner"}} {
			if p.bad {
				return nil, serverError(amqp091.PreconditionFailed, "invalid property '%s' for %s", p.name, what)
			}
		}
	}
	intArg := func(key string) (int64, bool, *amqp091.Error) {
		v, ok := args[key]
		if !ok {
			return 0, false, nil
		}
		n, isInt := asInt(v)
		if !isInt {
			return 0, false, invalidArg(key, "\"expected integer, got %s\"", typeName(v))
		}
		if n < 0 {
			return 0, false, invalidArg(key, "{value_negative,%d}", n)
		}
		return n, true, nil
	}
	ttl, hasTTL, err := intArg("x-message-ttl")
	if err != nil {
		return nil, err
	}
	if ttl > MaxTTL {
		return nil, invalidArg("x-message-ttl", "{value_too_large,%d}", ttl)
	}
	q.ttl, q.hasTTL = msDuration(ttl), hasTTL
	if q.maxLen, q.hasMaxLen, err = intArg("x-max-length"); err != nil {
		return nil, err
	}
	q.overflow = "drop-head"
	if v, ok := args["x-overflow"]; ok {
		switch v {
		case "drop-head", "reject-publish", "reject-publish-dlx":
			q.overflow = v.(string)
		default:
			return nil, invalidArg("x-overflow", "invalid_overflow")
		}
	}
	q.strategy = "at-most-once"
	if v, ok := args["x-dead-letter-strategy"]; ok {
		if !q.quorum {
			return nil, serverError(amqp091.PreconditionFailed, "invalid arg 'x-dead-letter-strategy' for %s of queue type rabbit_classic_queue", what)
		}
		s, isStr := v.(string)
		switch {
		case !isStr:
			return nil, invalidArg("x-dead-letter-strategy", "{unacceptable_type,%s}", typeName(v))
		case s != "at-most-once" && s != "at-least-once":
			return nil, invalidArg("x-dead-letter-strategy", "invalid_dlx_strategy")
		}
		q.strategy = s
	}
	if q.quorum {
		if q.limit, q.hasLimit, err = intArg("x-delivery-limit"); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"x-dead-letter-exchange", "x-dead-letter-routing-key"} {
		if v, ok := args[k]; ok {
			s, isStr := v.(string)
			if !isStr {
				return nil, invalidArg(k, "\"expected longstr, got %s\"", typeName(v))
			}
			if k == "x-dead-letter-exchange" {
				q.dlx, q.hasDLX = s, true
			} else {
				q.dlrk, q.hasDLRK = s, true
			}
		}
	}
	if q.hasDLRK && !q.hasDLX {
		return nil, invalidArg("x-dead-letter-routing-key", "routing_key_but_no_dlx_defined")
	}
	return q, nil
}

// queueFor looks up a queue for an operation, enforcing exclusivity.
func (ch *channel) queueFor(name string) (*queue, *amqp091.Error) {
	q := ch.b.queues[name]
	if q == nil {
		return nil, noQueue(name)
	}
	if q.owner != nil && q.owner != ch.conn {
		return nil, locked(name)
	}
	return q, nil
}

func (ch *channel) QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error {
	return ch.bind(name, key, exchange, args, true)
}

func (ch *channel) QueueUnbind(name, key, exchange string, args amqp091.Table) error {
	return ch.bind(name, key, exchange, args, false)
}

func (ch *channel) bind(name, key, exchange string, args amqp091.Table, add bool) error {
	if err := args.Validate(); err != nil {
		return err
	}
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	if exchange == "" {
		return ch.fail(defaultExchangeRefused())
	}
	ex := ch.b.exchanges[exchange]
	if ex == nil {
		return ch.fail(noExchange(exchange))
	}
	if _, err := ch.queueFor(name); err != nil {
		return ch.fail(err)
	}
	bd := binding{queue: name, key: key, args: normalize(args)}
	i := slices.IndexFunc(ex.bindings, func(o binding) bool {
		return o.queue == bd.queue && o.key == bd.key && fmt.Sprint(o.args) == fmt.Sprint(bd.args)
	})
	switch {
	case add && i < 0:
		ex.bindings = append(ex.bindings, bd)
	case !add && i >= 0:
		ex.bindings = slices.Delete(ex.bindings, i, i+1)
		if ex.autoDelete && len(ex.bindings) == 0 {
			delete(ch.b.exchanges, ex.name)
		}
	}
	return nil
}

func (ch *channel) QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error) {
	if !ch.begin() {
		return 0, amqp091.ErrClosed
	}
	defer ch.end()
	q := ch.b.queues[name]
	if q == nil {
		return 0, nil
	}
	if q.owner != nil && q.owner != ch.conn {
		return 0, ch.fail(locked(name))
	}
	if ifUnused && len(q.consumers) > 0 {
		return 0, ch.fail(serverError(amqp091.PreconditionFailed, "queue '%s' in vhost '/' in use", name))
	}
	if ifEmpty && len(q.ready) > 0 {
		return 0, ch.fail(serverError(amqp091.PreconditionFailed, "queue '%s' in vhost '/' is not empty", name))
	}
	return ch.b.deleteQueue(q), nil
}

func (ch *channel) QueuePurge(name string, noWait bool) (int, error) {
	if !ch.begin() {
		return 0, amqp091.ErrClosed
	}
	defer ch.end()
	q, err := ch.queueFor(name)
	if err != nil {
		return 0, ch.fail(err)
	}
	n := len(q.ready)
	q.ready = nil
	return n, nil
}

func (ch *channel) Qos(prefetchCount, prefetchSize int, global bool) error {
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	if prefetchSize != 0 {
		return ch.fail(serverError(amqp091.NotImplemented, "prefetch_size!=0 (%d)", prefetchSize))
	}
	if global {
		ch.globalPrefetch = prefetchCount
	} else {
		ch.prefetch = prefetchCount
	}
	return nil
}

func (ch *channel) Consume(queueName, tag string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	if err := args.Validate(); err != nil {
		return nil, err
	}
	if !ch.begin() {
		return nil, amqp091.ErrClosed
	}
	defer ch.end()
	q, err := ch.queueFor(queueName)
	if err != nil {
		return nil, ch.fail(err)
	}
	if tag == "" {
		tag = ch.b.genName("amq.ctag")
	}
	if _, dup := ch.consumers[tag]; dup {
		return nil, ch.fail(serverError(amqp091.NotAllowed, "attempt to reuse consumer tag '%s'", tag))
	}
	if (exclusive && len(q.consumers) > 0) || slices.ContainsFunc(q.consumers, func(c *consumer) bool { return c.exclusive }) {
		return nil, ch.fail(serverError(amqp091.AccessRefused, "queue '%s' in vhost '/' in exclusive use", queueName))
	}
	out := make(chan amqp091.Delivery)
	c := &consumer{tag: tag, ch: ch, q: q, autoAck: autoAck, exclusive: exclusive, prefetch: ch.prefetch, pipe: newPipe(out, false)}
	ch.consumers[tag] = c
	q.consumers = append(q.consumers, c)
	q.hadConsumer = true
	return out, nil
}

func (ch *channel) Cancel(tag string, noWait bool) error {
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	if c := ch.consumers[tag]; c != nil {
		delete(ch.consumers, tag)
		c.pipe.drain() // what was delivered before cancel-ok still reaches the receiver
		ch.b.removeConsumer(c)
		ch.cancelled = append(ch.cancelled, c)
	}
	return nil
}

// deliver hands message m of queue q to consumer c.
func (ch *channel) deliver(q *queue, m *message, c *consumer) {
	ch.nextTag++
	d := m.delivery(q, false)
	d.Acknowledger = ch
	d.ConsumerTag = c.tag
	d.DeliveryTag = ch.nextTag
	if !c.autoAck {
		ch.unacked = append(ch.unacked, &pending{tag: ch.nextTag, q: q, m: m, c: c})
		c.unacked++
		q.unacked++
	}
	c.pipe.push(d)
}

func (ch *channel) Get(queueName string, autoAck bool) (amqp091.Delivery, bool, error) {
	if !ch.begin() {
		return amqp091.Delivery{}, false, amqp091.ErrClosed
	}
	defer ch.end()
	q, err := ch.queueFor(queueName)
	if err != nil {
		return amqp091.Delivery{}, false, ch.fail(err)
	}
	if len(q.ready) == 0 {
		return amqp091.Delivery{}, false, nil
	}
	m := q.ready[0]
	q.ready = q.ready[1:]
	ch.nextTag++
	d := m.delivery(q, true)
	d.Acknowledger = ch
	d.DeliveryTag = ch.nextTag
	d.MessageCount = uint32(len(q.ready))
	if !autoAck {
		ch.unacked = append(ch.unacked, &pending{tag: ch.nextTag, q: q, m: m})
		q.unacked++
	}
	return d, true, nil
}

func (ch *channel) Ack(tag uint64, multiple bool) error {
	return ch.settle(tag, multiple, "ack")
}

func (ch *channel) Nack(tag uint64, multiple, requeue bool) error {
	if requeue {
		return ch.settle(tag, multiple, "requeue")
	}
	return ch.settle(tag, multiple, "reject")
}

func (ch *channel) Reject(tag uint64, requeue bool) error {
	return ch.Nack(tag, false, requeue)
}

// settle acknowledges or rejects deliveries like rabbit_channel:collect_acks: tag must be
// outstanding (else 406 unknown delivery tag); multiple also takes every earlier one, and
// multiple with tag 0 takes all.
func (ch *channel) settle(tag uint64, multiple bool, action string) error {
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	var taken []*pending
	switch {
	case multiple && tag == 0:
		taken, ch.unacked = ch.unacked, nil
	default:
		i := slices.IndexFunc(ch.unacked, func(p *pending) bool { return p.tag == tag })
		if i < 0 {
			ch.fail(serverError(amqp091.PreconditionFailed, "unknown delivery tag %d", tag))
			return nil
		}
		from := i
		if multiple {
			from = 0
		}
		taken = slices.Clone(ch.unacked[from : i+1])
		ch.unacked = slices.Delete(ch.unacked, from, i+1)
	}
	now := ch.b.clk.Now()
	for _, p := range taken {
		p.q.unacked--
		if p.c != nil {
			p.c.unacked--
		}
		switch action {
		case "requeue":
			ch.b.requeue(p.q, p.m, now, false)
		case "reject":
			if !p.q.deleted {
				ch.b.deadLetter(p.q, p.m, "rejected", now)
			}
		}
	}
	return nil
}

func (ch *channel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	_, err := ch.publish(ctx, exchange, key, mandatory, immediate, msg)
	return err
}

func (ch *channel) PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (amqp.DeferredConfirmation, error) {
	dc, err := ch.publish(ctx, exchange, key, mandatory, immediate, msg)
	if dc == nil {
		return nil, err
	}
	return dc, err
}

// publish performs basic.publish. Like the real client it returns nil when the broker then
// closes the channel (a missing exchange): the close reaches NotifyClose and later calls fail.
// A mandatory publishing that reaches no queue is returned (312 NO_ROUTE) to the NotifyReturn
// listeners before its confirmation; one that a full queue refuses (x-overflow reject-publish)
// is confirmed with a nack.
func (ch *channel) publish(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*confirmation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := msg.Headers.Validate(); err != nil {
		return nil, err
	}
	if !ch.begin() {
		return nil, amqp091.ErrClosed
	}
	defer ch.end()
	var dc *confirmation
	if ch.confirming {
		ch.published++
		dc = &confirmation{tag: ch.published, done: make(chan struct{})}
	}
	if err := ch.refusal(exchange, immediate, msg.Expiration); err != nil {
		// The channel closes; like amqp091-go, its pending confirmation resolves as a nack.
		ch.fail(err)
		if dc != nil {
			close(dc.done)
		}
		return dc, nil
	}
	b := ch.b
	ex := b.exchanges[exchange]
	msg.Headers = normalize(msg.Headers)
	msg.Body = slices.Clone(msg.Body)
	if !msg.Timestamp.IsZero() {
		msg.Timestamp = time.Unix(msg.Timestamp.Unix(), 0)
	}
	routed, refused := b.publish(ex, key, &message{pub: msg}, b.clk.Now())
	if mandatory && !routed {
		ret := amqp091.Return{
			ReplyCode: amqp091.NoRoute, ReplyText: "NO_ROUTE", Exchange: exchange, RoutingKey: key,
			ContentType: msg.ContentType, ContentEncoding: msg.ContentEncoding, Headers: normalize(msg.Headers),
			DeliveryMode: msg.DeliveryMode, Priority: msg.Priority, CorrelationId: msg.CorrelationId,
			ReplyTo: msg.ReplyTo, Expiration: msg.Expiration, MessageId: msg.MessageId, Timestamp: msg.Timestamp,
			Type: msg.Type, UserId: msg.UserId, AppId: msg.AppId, Body: slices.Clone(msg.Body),
		}
		for _, p := range ch.returns {
			// amqp091-go's reader hands a return to its listeners before it reads the
			// confirmation that follows; a listener with room gets it now, so it is there by
			// the time the confirmation resolves.
			p.pushNow(ret)
		}
	}
	if dc != nil {
		dc.ack = !refused
		close(dc.done)
		for _, p := range ch.confirms {
			p.push(amqp091.Confirmation{DeliveryTag: dc.tag, Ack: dc.ack})
		}
	}
	return dc, nil
}

// refusal returns the error with which RabbitMQ refuses a publishing, or nil.
func (ch *channel) refusal(exchange string, immediate bool, expiration string) *amqp091.Error {
	ex := ch.b.exchanges[exchange]
	switch {
	case immediate:
		return serverError(amqp091.NotImplemented, "immediate=true")
	case ex == nil:
		return noExchange(exchange)
	case ex.internal:
		return serverError(amqp091.AccessRefused, "cannot publish to internal exchange '%s' in vhost '/'", exchange)
	}
	if expiration != "" {
		n, err := strconv.ParseInt(expiration, 10, 64)
		if errors.Is(err, strconv.ErrRange) && strings.Trim(expiration, "0123456789") == "" {
			return serverError(amqp091.PreconditionFailed, "invalid expiration '%s': {value_too_large,%s}", expiration, expiration)
		}
		if err != nil {
			return serverError(amqp091.PreconditionFailed, "invalid expiration '%s': no_integer", expiration)
		}
		if n < 0 {
			return serverError(amqp091.PreconditionFailed, "invalid expiration '%s': {value_negative,%d}", expiration, n)
		}
		if n > MaxTTL {
			return serverError(amqp091.PreconditionFailed, "invalid expiration '%s': {value_too_large,%d}", expiration, n)
		}
	}
	return nil
}

func (ch *channel) Confirm(noWait bool) error {
	if !ch.begin() {
		return amqp091.ErrClosed
	}
	defer ch.end()
	ch.confirming = true
	return nil
}

func (ch *channel) NotifyPublish(confirm chan amqp091.Confirmation) chan amqp091.Confirmation {
	ch.b.mu.Lock()
	defer ch.b.mu.Unlock()
	if ch.closed {
		close(confirm)
		return confirm
	}
	ch.confirms = append(ch.confirms, newPipe(confirm, true))
	return confirm
}

func (ch *channel) NotifyReturn(c chan amqp091.Return) chan amqp091.Return {
	ch.b.mu.Lock()
	defer ch.b.mu.Unlock()
	if ch.closed {
		close(c)
		return c
	}
	ch.returns = append(ch.returns, newPipe(c, true))
	return c
}

func (ch *channel) NotifyClose(c chan *amqp091.Error) chan *amqp091.Error {
	ch.b.mu.Lock()
	defer ch.b.mu.Unlock()
	if ch.closed {
		close(c)
		return c
	}
	ch.closes = append(ch.closes, c)
	return c
}

func (ch *channel) NotifyCancel(c chan string) chan string {
	ch.b.mu.Lock()
	defer ch.b.mu.Unlock()
	if ch.closed {
		close(c)
		return c
	}
	ch.cancels = append(ch.cancels, newPipe(c, true))
	return c
}

func (ch *channel) Close() error {
	if !ch.begin() {
		return nil
	}
	defer ch.end()
	ch.b.closeChannel(ch, nil)
	return nil
}

func (ch *channel) IsClosed() bool {
	ch.b.mu.Lock()
	defer ch.b.mu.Unlock()
	return ch.closed
}

// confirmation is amqptest's DeferredConfirmation. The broker confirms a publishing as soon as
// it has routed it, so it is always resolved by the time the caller sees it.
type confirmation struct {
	tag  uint64
	ack  bool
	done chan struct{}
}

func (c *confirmation) Done() <-chan struct{} { return c.done }

func (c *confirmation) Acked() bool {
	select {
	case <-c.done:
		return c.ack
	default:
		return false
	}
}

func (c *confirmation) Wait() bool {
	<-c.done
	return c.ack
}

func (c *confirmation) WaitContext(ctx context.Context) (bool, error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.done:
		return c.ack, nil
	}
}
