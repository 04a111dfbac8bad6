package amqp

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/rabbitmq/amqp091-go"
)

// topology is what one subscription needs on the server: its queue with arguments, the
// exchanges it is bound to, where its delayed copies wait (a Delay), and the dead-letter queue
// of its cap.
type topology struct {
	cfg  *queueConfig
	args amqp091.Table
	dest string // the cap's dead-letter queue, "" without a cap
	log  *slog.Logger

	// server are the queue's arguments as the server holds them, read without declaring when
	// settle does not declare (nil when declaring, or when the server would not say).
	server amqp091.Table
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
	} else {
		if _, err := ch.QueueDeclarePassive(c.name, c.durable, c.autoDelete, c.exclusive, false, nil); err != nil {
			return topologyErr("queue", c.name, nil, err)
		}
		if err := t.verifyType(b); err != nil {
			return err
		}
	}
	if c.delay != nil {
		if err := reopen(); err != nil {
			return err
		}
		if err := c.delay.Ensure(ch, c.name, declare); err != nil {
			return fmt.Errorf("delayed retries of queue %q: %w", c.name, err)
		}
		if w, ok := c.delay.(WaitingQueue); ok && !declare {
			got, err := queueArguments(b.channel, w.Name(c.name), true, false)
			switch {
			case errors.Is(err, errInconclusive):
				t.log.Warn("amqp: could not read the waiting queue's arguments; at-least-once dead-lettering not verified", "waiting_queue", w.Name(c.name), "error", err)
			case err != nil:
				return fmt.Errorf("delayed retries of queue %q: %w", c.name, topologyErr("waiting queue", w.Name(c.name), nil, err))
			default:
				if err := w.verify(c.name, got); err != nil {
					return fmt.Errorf("delayed retries of queue %q: %w", c.name, err)
				}
			}
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
	// A missing dead letter is declared a durable classic queue, which any subscription can
	// mount; in a cluster, declare it a quorum queue beforehand so that it stays available when
	// its node goes down (settle only checks that an existing one exists).
	if _, err := ch.QueueDeclare(t.dest, true, false, false, false, nil); err != nil {
		return fmt.Errorf("dead-letter queue of core.DeadLetterAfter: %w", topologyErr("queue", t.dest, nil, err))
	}
	return nil
}

// verifyType reads the existing queue's arguments without declaring anything
// (queueArguments) and refuses a queue of the other type than the descriptor's: a Quorum
// descriptor on a classic queue would log a delivery limit the queue does not have and count
// attempts it cannot count, a Classic one on a quorum queue would count them twice.
func (t *topology) verifyType(b *Broker) error {
	c := t.cfg
	if c.exclusive {
		return nil // exclusive to its declaring connection: no other connection may probe it
	}
	got, err := queueArguments(b.channel, c.name, c.durable, c.autoDelete)
	if errors.Is(err, errInconclusive) {
		t.log.Warn("amqp: could not read the queue's arguments; its type (classic or quorum) is not verified", "error", err)
		return nil
	}
	if err != nil {
		return topologyErr("queue", c.name, nil, err)
	}
	t.server = got
	typ, _ := argString(got, "x-queue-type")
	want, ctor := "classic", "amqp.Classic"
	if c.quorum {
		want, ctor = "quorum", "amqp.Quorum"
	}
	if typ != want {
		other := "amqp.Quorum"
		if !c.quorum {
			other = "amqp.Classic"
		}
		if typ == "quorum" {
			other = "amqp.Quorum"
		} else if typ == "classic" {
			other = "amqp.Classic"
		}
		return &TopologyError{Kind: "queue", Name: c.name, Declared: amqp091.Table{"x-queue-type": want},
			Problem: fmt.Sprintf("is a %s queue (x-queue-type %q, read from the server without declaring); it is mounted with %s: mount it with %s, or declare the queue as a %s queue", typ, typ, ctor, other, want)}
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
