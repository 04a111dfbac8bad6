package amqp

import (
	"errors"
	"fmt"

	"github.com/rabbitmq/amqp091-go"
)

// topology is what one subscription needs on the server: its queue with arguments, the
// exchanges it is bound to, where its delayed copies wait (a Delay), and the dead-letter queue
// of its cap.
type topology struct {
	cfg  *queueConfig
	args amqp091.Table
	dest string // the cap's dead-letter queue, "" without a cap
}

// ensure declares the topology (declare) or checks that it exists. Each step runs on a channel
// of its own where a failure closes the channel (a passive check of a missing entity does).
func (t *topology) ensure(b *Broker, declare bool) error {
	ch, err := b.channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	reopen := func() error {
		_ = ch.Close()
		ch, err = b.channel()
		return err
	}
	for _, bd := range t.cfg.bindings {
		if declare {
			err = ch.ExchangeDeclare(bd.exchange, bd.kind, true, false, false, false, nil)
		} else {
			err = ch.ExchangeDeclarePassive(bd.exchange, bd.kind, true, false, false, false, nil)
		}
		if err != nil {
			return topologyErr("exchange", bd.exchange, nil, err)
		}
	}
	c := t.cfg
	if declare {
		durable, autoDelete, exclusive := c.durable, c.autoDelete, c.exclusive
		if c.quorum {
			durable, autoDelete, exclusive = true, false, false
		}
		if _, err := ch.QueueDeclare(c.name, durable, autoDelete, exclusive, false, t.args); err != nil {
			return topologyErr("queue", c.name, t.args, err)
		}
		for _, bd := range c.bindings {
			if err := ch.QueueBind(c.name, bd.key, bd.exchange, false, nil); err != nil {
				return fmt.Errorf("bind queue %q to exchange %q with key %q: %w", c.name, bd.exchange, bd.key, err)
			}
		}
	} else if _, err := ch.QueueDeclarePassive(c.name, c.durable, c.autoDelete, c.exclusive, false, nil); err != nil {
		return topologyErr("queue", c.name, nil, err)
	}
	if c.delay != nil {
		if err := reopen(); err != nil {
			return err
		}
		if err := c.delay.Ensure(ch, c.name, declare); err != nil {
			return fmt.Errorf("delayed retries of queue %q: %w", c.name, err)
		}
	}
	if t.dest == "" {
		return nil
	}
	_, err = ch.QueueDeclarePassive(t.dest, true, false, false, false, nil)
	if err == nil {
		return nil
	}
	if !declare || !isCode(err, amqp091.NotFound) {
		return fmt.Errorf("dead-letter queue of core.DeadLetterAfter: %w", topologyErr("queue", t.dest, nil, err))
	}
	if err := reopen(); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(t.dest, true, false, false, false, nil); err != nil {
		return fmt.Errorf("dead-letter queue of core.DeadLetterAfter: %w", topologyErr("queue", t.dest, nil, err))
	}
	return nil
}

func isCode(err error, code int) bool {
	var ae *amqp091.Error
	return errors.As(err, &ae) && ae.Code == code
}

func topologyErr(kind, name string, declared amqp091.Table, err error) error {
	if isCode(err, amqp091.NotFound) || isCode(err, amqp091.PreconditionFailed) {
		return &TopologyError{Kind: kind, Name: name, Declared: declared, Err: err}
	}
	return fmt.Errorf("%s %q: %w", kind, name, err)
}
