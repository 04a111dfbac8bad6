package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// seed publishes n messages with ids m-00000…, each confirmed by the server.
func (t *trialRun) seed(ctx context.Context, n int) error {
	if t.backend == "nats" {
		nc, err := nats.Connect(t.url, nats.Timeout(2*time.Second))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		for i := range n {
			if _, err := js.Publish(ctx, t.queue, []byte(`{"id":"`+msgID(i)+`"}`), jetstream.WithMsgID(msgID(i))); err != nil {
				return fmt.Errorf("nats: seeding %s: %w", t.queue, err)
			}
		}
		return nil
	}
	conn, err := amqp091.Dial(t.url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	var pending []*amqp091.DeferredConfirmation
	for i := range n {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", t.queue, true, false, amqp091.Publishing{
			MessageId: msgID(i), DeliveryMode: amqp091.Persistent, ContentType: "application/json",
			Body: []byte(`{"id":"` + msgID(i) + `"}`)})
		if err != nil {
			return fmt.Errorf("rabbitmq: seeding %s: %w", t.queue, err)
		}
		pending = append(pending, c)
		if len(pending) == 500 || i == n-1 {
			for _, c := range pending {
				if ok, err := c.WaitContext(ctx); err != nil || !ok {
					return fmt.Errorf("rabbitmq: seeding %s: not confirmed (%v)", t.queue, err)
				}
			}
			pending = pending[:0]
		}
	}
	return nil
}

// remaining is how many messages the queue holds (ready ones: the worker is stopped or idle).
func (t *trialRun) remaining(ctx context.Context) (int, error) {
	if t.backend == "nats" {
		nc, err := nats.Connect(t.url, nats.Timeout(2*time.Second))
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return 0, err
		}
		s, err := js.Stream(ctx, t.queue)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, err
		}
		return int(info.State.Msgs), nil
	}
	conn, err := amqp091.Dial(t.url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(t.queue, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}

// cleanup stops the worker and deletes the queue.
func (t *trialRun) cleanup() {
	if t.worker != nil && !t.worker.Exited() {
		t.worker.KillGroup()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if t.backend == "nats" {
		if nc, err := nats.Connect(t.url); err == nil {
			if js, err := jetstream.New(nc); err == nil {
				_ = js.DeleteStream(ctx, t.queue)
			}
			nc.Close()
		}
		return
	}
	if conn, err := amqp091.Dial(t.url); err == nil {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(t.queue, false, false, false)
		}
		conn.Close()
	}
}
