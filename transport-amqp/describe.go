package amqp

import (
	"fmt"

	"github.com/settlehq/settle/core"
)

var (
	_ core.Describer = (*ClassicQueue)(nil)
	_ core.Describer = (*QuorumQueue)(nil)
)

// Describe says what the classic queue is on RabbitMQ for sub (core.Describer): its
// declaration, where its delayed retries wait and its dead-letter queue. It reads configuration
// only.
func (q *ClassicQueue) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	return describe(q.b, &q.cfg, sub)
}

// Describe says what the quorum queue is on RabbitMQ for sub (core.Describer): its declaration
// with the arguments the subscription's cap becomes, where its delayed retries wait and its
// dead-letter queue. It reads configuration only.
func (q *QuorumQueue) Describe(sub core.SubscriptionDescription) core.EndpointDescription {
	return describe(q.b, &q.cfg, sub)
}

func describe(b *Broker, c *queueConfig, sub core.SubscriptionDescription) core.EndpointDescription {
	typ := "classic"
	if c.quorum {
		typ = "quorum"
	}
	q := &core.AMQPQueue{Name: c.name, Type: typ, Durable: c.durable, Exclusive: c.exclusive, AutoDelete: c.autoDelete}
	if args := c.queueArgs(sub.Cap, sub.DeadLetterTo); len(args) > 0 {
		q.Arguments = map[string]any(args)
	}
	for _, x := range c.bindings {
		q.Bindings = append(q.Bindings, core.AMQPBinding{Exchange: x.exchange, Kind: x.kind, Key: x.key})
	}
	d := core.EndpointDescription{Backend: core.BackendAMQP, AMQP: q, Delay: "process",
		Settings: map[string]any{"declare_topology": b.declare, "publish_policy": c.policy.String()}}
	if c.prefetch > 0 {
		d.Settings["prefetch"] = c.prefetch
	}
	if c.delay != nil {
		d.Delay = c.delay.Where(c.name)
	}
	if w, ok := c.delay.(WaitingQueue); ok {
		name := w.Name(c.name)
		d.Related = append(d.Related, core.RelatedQueue{Role: core.RoleDelay, Name: name,
			About: fmt.Sprintf("A delayed retry waits here until its per-message TTL runs out, then RabbitMQ dead-letters it back to %s, at least once.", c.name),
			AMQP:  &core.AMQPQueue{Name: name, Type: "quorum", Durable: true, Arguments: map[string]any(w.Args(c.name))}})
	}
	if sub.Cap > 0 {
		dl := core.RelatedQueue{Role: core.RoleDeadLetter, Name: sub.DeadLetterTo,
			About: fmt.Sprintf("settle publishes a dead letter here (%s), with why it died in the settle-* headers; an existing queue is only checked.", c.policy)}
		if c.quorum {
			dl.About += fmt.Sprintf(" The server also routes here a message whose deliveries reach x-delivery-limit %d (the cap + BackstopMargin) without settling.", sub.Cap+BackstopMargin)
		}
		if b.declare {
			dl.About += " A missing one is declared a durable classic queue."
			dl.AMQP = &core.AMQPQueue{Name: sub.DeadLetterTo, Type: "classic", Durable: true}
		}
		d.Related = append(d.Related, dl)
	}
	return d
}
