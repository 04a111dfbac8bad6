package amqptest

import (
	"slices"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// queue is a declared queue: its flags and arguments, its ready messages in delivery order and
// its consumers.
type queue struct {
	name                           string
	durable, autoDelete, exclusive bool
	owner                          *connection // the declaring connection of an exclusive queue
	args                           amqp091.Table
	quorum                         bool

	ttl      time.Duration
	hasTTL   bool
	dlx      string
	hasDLX   bool
	dlrk     string
	hasDLRK  bool
	limit    int64
	hasLimit bool

	maxLen    int64
	hasMaxLen bool
	overflow  string // x-overflow: "drop-head" (the default), "reject-publish", "reject-publish-dlx"
	strategy  string // x-dead-letter-strategy of a quorum queue: "at-most-once" (the default) or "at-least-once"

	ready       []*message
	unacked     int
	dlPending   []pendingDead // dead letters kept at-least-once until their targets take them
	consumers   []*consumer
	rr          int
	hadConsumer bool
	deleted     bool
}

// pendingDead is a dead letter a quorum queue dead-lettering at-least-once keeps while its
// targets refuse it: the message as it will be routed (x-death written) and why it died.
type pendingDead struct {
	m      *message
	reason string
}

// atLeastOnce reports whether q dead-letters at-least-once: a quorum queue with
// x-dead-letter-strategy at-least-once, which RabbitMQ honours only with x-overflow
// reject-publish.
func (q *queue) atLeastOnce() bool {
	return q.quorum && q.strategy == "at-least-once" && q.overflow == "reject-publish"
}

// message is one message as a queue holds it.
type message struct {
	seq         uint64 // position: a requeued classic message goes back to it
	exchange    string
	routingKey  string
	pub         amqp091.Publishing
	expiring    bool
	expires     time.Time
	redelivered bool
	deliveries  int64 // quorum queues: how many times it came back (x-delivery-count)
	returned    bool  // quorum queues: back in ready after its channel closed (served first)
}

func (m *message) clone() *message {
	c := *m
	return &c
}

// delivery renders the message as RabbitMQ delivers it. Quorum queues add x-delivery-count:
// basic.get always (0 on the first delivery), basic.consume from the first redelivery on.
func (m *message) delivery(q *queue, get bool) amqp091.Delivery {
	h := normalize(m.pub.Headers)
	if q.quorum && (get || m.deliveries > 0) {
		if h == nil {
			h = amqp091.Table{}
		}
		h["x-delivery-count"] = m.deliveries
	}
	p := m.pub
	return amqp091.Delivery{
		Headers:         h,
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		DeliveryMode:    p.DeliveryMode,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationId,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageId,
		Timestamp:       p.Timestamp,
		Type:            p.Type,
		UserId:          p.UserId,
		AppId:           p.AppId,
		Redelivered:     m.redelivered,
		Exchange:        m.exchange,
		RoutingKey:      m.routingKey,
		Body:            slices.Clone(p.Body),
	}
}

// requeue returns a delivered message to q. A classic queue puts it back at its original
// position; a quorum queue appends it (measured on RabbitMQ 3.10: a message rejected with
// requeue comes after messages already ready and before ones published later), counts the
// return, and dead-letters it with reason delivery_limit once the count exceeds
// x-delivery-limit.
func (b *Broker) requeue(q *queue, m *message, at time.Time, returned bool) {
	if q.deleted {
		return
	}
	m.redelivered = true
	if q.quorum {
		m.deliveries++
		if q.hasLimit && m.deliveries > q.limit {
			b.deadLetter(q, m, "delivery_limit", at)
			return
		}
		if !returned {
			// A reject with requeue goes to the back, behind what is ready.
			m.returned = false
			q.ready = append(q.ready, m)
			return
		}
		// A message returned by a closed channel comes back before the ones never delivered
		// or requeued (rabbit_fifo keeps returns apart, in the order they came back).
		m.returned = true
		i := 0
		for i < len(q.ready) && q.ready[i].returned {
			i++
		}
		q.ready = slices.Insert(q.ready, i, m)
		return
	}
	i, _ := slices.BinarySearchFunc(q.ready, m.seq, func(e *message, seq uint64) int {
		switch {
		case e.seq < seq:
			return -1
		case e.seq > seq:
			return 1
		}
		return 0
	})
	q.ready = slices.Insert(q.ready, i, m)
}

// full reports whether q refuses another publishing under x-overflow reject-publish (or
// reject-publish-dlx). Measured on RabbitMQ 3.10: a classic queue refuses once it holds
// x-max-length ready messages; a quorum queue only once it holds more than that (with
// x-max-length 0 it takes one message, with 1 it takes two).
func (q *queue) full() bool {
	if !q.hasMaxLen || (q.overflow != "reject-publish" && q.overflow != "reject-publish-dlx") {
		return false
	}
	if q.quorum {
		return int64(len(q.ready)) > q.maxLen
	}
	return int64(len(q.ready)) >= q.maxLen
}

// removeConsumer detaches c from its queue and deletes an auto-delete queue that lost its
// last consumer.
func (b *Broker) removeConsumer(c *consumer) {
	q := c.q
	if i := slices.Index(q.consumers, c); i >= 0 {
		q.consumers = slices.Delete(q.consumers, i, i+1)
		if q.rr > i {
			q.rr--
		}
		if len(q.consumers) > 0 {
			q.rr %= len(q.consumers)
		} else {
			q.rr = 0
		}
	}
	c.pipe.stop()
	if q.autoDelete && q.hadConsumer && len(q.consumers) == 0 {
		b.deleteQueue(q)
	}
}

// deleteQueue removes q, its bindings and its ready messages, and cancels its consumers
// (reported to NotifyCancel, as RabbitMQ sends basic.cancel).
func (b *Broker) deleteQueue(q *queue) int {
	if q.deleted {
		return 0
	}
	q.deleted = true
	delete(b.queues, q.name)
	n := len(q.ready)
	q.ready = nil
	for _, ex := range b.exchanges {
		ex.bindings = slices.DeleteFunc(ex.bindings, func(bd binding) bool { return bd.queue == q.name })
	}
	for _, c := range slices.Clone(q.consumers) {
		delete(c.ch.consumers, c.tag)
		b.removeConsumer(c)
		for _, p := range c.ch.cancels {
			p.push(c.tag)
		}
	}
	return n
}
