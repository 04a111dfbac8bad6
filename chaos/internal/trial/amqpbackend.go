package trial

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
)

// amqpBackend is a queue (and its waiting and dead-letter queues) on the suite's own RabbitMQ
// node. Workers connect through the suite's TCP proxy, so that their connections can be cut.
type amqpBackend struct {
	env                *Env
	queueType, delay   string
	queue, dead, retry string
	conn               *amqp091.Connection
	// saved holds the dead letters taken out of the dead-letter queue before the driver
	// deleted it (DeleteDead): the fault is the missing queue, not the loss of its contents.
	saved []amqp091.Delivery
}

func (b *amqpBackend) name() string { return "rabbitmq" }

func (b *amqpBackend) prepare(ctx context.Context, r *run) error {
	node, err := b.env.rabbitmq(ctx)
	if err != nil {
		return err
	}
	b.queue = "chaos-" + r.id
	b.dead, b.retry = b.queue+".dead", b.queue+".retry"
	b.conn, err = amqp091.Dial(node.URL())
	if err != nil {
		return fmt.Errorf("rabbitmq: driver connection: %w", err)
	}
	return nil
}

func (b *amqpBackend) workerArgs(r *run) []string {
	return []string{"-backend", "rabbitmq", "-dsn", "amqp://guest:guest@" + b.env.amqpProxy.Addr() + "/",
		"-queue-type", b.queueType, "-delay", b.delay, "-queue", b.queue, "-dead", b.dead}
}

// channel opens a channel on the driver's connection, reconnecting after a broker restart.
func (b *amqpBackend) channel(ctx context.Context) (*amqp091.Channel, error) {
	if b.conn == nil || b.conn.IsClosed() {
		node, err := b.env.rabbitmq(ctx)
		if err != nil {
			return nil, err
		}
		if b.conn, err = amqp091.Dial(node.URL()); err != nil {
			return nil, fmt.Errorf("rabbitmq: driver connection: %w", err)
		}
	}
	return b.conn.Channel()
}

// seed publishes one persistent message per id, confirmed, after the first worker has
// declared the queue.
func (b *amqpBackend) seed(ctx context.Context, ids []string) error {
	ch, err := b.channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	var confirms []*amqp091.DeferredConfirmation
	for _, id := range ids {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", b.queue, true, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: id, ContentType: "application/json",
			Body: []byte(`{"id":"` + id + `"}`),
		})
		if err != nil {
			return fmt.Errorf("rabbitmq: seed %s: %w", b.queue, err)
		}
		confirms = append(confirms, c)
	}
	for i, c := range confirms {
		ok, err := c.WaitContext(ctx)
		if err != nil || !ok {
			return fmt.Errorf("rabbitmq: seed %s: message %s not confirmed (%v)", b.queue, ids[i], err)
		}
	}
	return nil
}

// pending counts the ready messages of the queue and its waiting queue. It is not exact:
// messages in flight to a worker, or waiting in a worker's process, are not counted.
func (b *amqpBackend) pending(ctx context.Context) (int, bool, error) {
	n := 0
	for _, q := range []string{b.queue, b.retry} {
		ch, err := b.channel(ctx)
		if err != nil {
			return 0, false, err
		}
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			var ae *amqp091.Error
			if errors.As(err, &ae) && ae.Code == amqp091.NotFound && q == b.retry {
				continue
			}
			return 0, false, fmt.Errorf("rabbitmq: queue %s: %w", q, err)
		}
		ch.Close()
		n += st.Messages
	}
	return n, false, nil
}

// deadCount is the number of messages in the dead-letter queue (and taken out of it before
// the driver deleted it).
func (b *amqpBackend) deadCount(ctx context.Context) (int, error) {
	ch, err := b.channel(ctx)
	if err != nil {
		return 0, err
	}
	st, err := ch.QueueDeclarePassive(b.dead, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	ch.Close()
	return st.Messages + len(b.saved), nil
}

// snapshot takes every message left in the queue, the waiting queue and the dead-letter queue
// (the workers are stopped, so nothing is in flight).
func (b *amqpBackend) snapshot(ctx context.Context) (chaos.Snapshot, error) {
	snap := chaos.Snapshot{Messages: make(map[string]chaos.Observed), AbsentIsSettled: true, AcksUnconfirmed: true}
	for _, d := range b.saved {
		b.observe(&snap, b.dead, d)
	}
	for _, q := range []string{b.queue, b.retry, b.dead} {
		ch, err := b.channel(ctx)
		if err != nil {
			return snap, err
		}
		for {
			d, ok, err := b.get(ch, q)
			if err != nil {
				var ae *amqp091.Error
				if errors.As(err, &ae) && ae.Code == amqp091.NotFound {
					break // no such queue: nothing waits there
				}
				return snap, fmt.Errorf("rabbitmq: read %s: %w", q, err)
			}
			if !ok {
				ch.Close()
				break
			}
			b.observe(&snap, q, d)
		}
	}
	return snap, nil
}

// getWait bounds one basic.get of the driver: RabbitMQ answers at once, or never (a quorum queue
// with no leader after a node was killed holds the call forever).
const getWait = 10 * time.Second

// get takes one message from q (basic.get, auto-acknowledged). A call that does not answer
// within getWait closes the driver's connection and fails, naming the queue, instead of
// holding the trial.
func (b *amqpBackend) get(ch *amqp091.Channel, q string) (amqp091.Delivery, bool, error) {
	type got struct {
		d   amqp091.Delivery
		ok  bool
		err error
	}
	res := make(chan got, 1)
	go func() {
		d, ok, err := ch.Get(q, true)
		res <- got{d, ok, err}
	}()
	select {
	case g := <-res:
		return g.d, g.ok, g.err
	case <-time.After(getWait):
		b.conn.Close() // ends the call
		b.conn = nil
		return amqp091.Delivery{}, false, fmt.Errorf("rabbitmq: basic.get on %s had no answer within %v (a quorum queue without a leader?)", q, getWait)
	}
}

// observe adds a message read from queue q to the snapshot.
func (b *amqpBackend) observe(snap *chaos.Snapshot, q string, d amqp091.Delivery) {
	id := messageIDOf(d.Body)
	if id == "" {
		snap.Strangers++
		return
	}
	o := snap.Messages[id]
	o.Copies++
	if o.Copies == 1 {
		o.Count = -1
	}
	if q == b.dead {
		o.Where = chaos.Dead
		o.Count, o.CountErr = amqpCount(d.Headers)
		o.ServerMoved = movedAtLimit(d.Headers, b.queue)
	} else if o.Where != chaos.Dead {
		o.Where = chaos.Pending
	}
	snap.Messages[id] = o
}

// amqpCount reads a dead letter's settle-retry-count header; -1 when it has none (a message
// the broker moved by itself carries only x-death).
func amqpCount(h amqp091.Table) (int, string) {
	v, ok := h[retryCountHeader]
	if !ok {
		return -1, ""
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	default:
		return -1, fmt.Sprintf("%s of type %T", retryCountHeader, v)
	}
	n, err := parseCount(s)
	if err != nil {
		return -1, fmt.Sprintf("%s %q: %v", retryCountHeader, s, err)
	}
	return n, ""
}

// movedAtLimit reports whether the broker moved the message itself because it reached queue's
// delivery limit: an x-death entry of that queue with reason delivery_limit (a quorum queue).
func movedAtLimit(h amqp091.Table, queue string) bool {
	list, _ := h["x-death"].([]any)
	for _, e := range list {
		t, _ := e.(amqp091.Table)
		if t == nil {
			continue
		}
		q, _ := t["queue"].(string)
		r, _ := t["reason"].(string)
		if q == queue && r == "delivery_limit" {
			return true
		}
	}
	return false
}

// terminate makes the node close every client connection (rabbitmqctl close_all_connections).
func (b *amqpBackend) terminate(ctx context.Context) (int, error) {
	node, err := b.env.rabbitmq(ctx)
	if err != nil {
		return 0, err
	}
	return 1, node.CloseConnections(ctx)
}

// cut resets every proxied worker connection.
func (b *amqpBackend) cut() int { return b.env.amqpProxy.Cut() }

// restart restarts the node's RabbitMQ application (Graceful) or kills the node and starts it
// again (Crash).
func (b *amqpBackend) restart(ctx context.Context, mode servers.StopMode) error {
	node, err := b.env.rabbitmq(ctx)
	if err != nil {
		return err
	}
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	if mode == servers.Graceful {
		return node.RestartApp(ctx)
	}
	return node.Restart(ctx, servers.Crash)
}

// deleteDead deletes the dead-letter queue — after taking out what it holds, and only while
// it is empty, so the fault loses nothing itself — or declares it again (durable, as the
// transport declares it) when back is true.
func (b *amqpBackend) deleteDead(ctx context.Context, back bool) error {
	if back {
		ch, err := b.channel(ctx)
		if err != nil {
			return err
		}
		defer ch.Close()
		_, err = ch.QueueDeclare(b.dead, true, false, false, false, nil)
		return err
	}
	var err error
	for try := 0; try < 20; try++ {
		var ch *amqp091.Channel
		if ch, err = b.channel(ctx); err != nil {
			return err
		}
		for {
			d, ok, gerr := b.get(ch, b.dead)
			if gerr != nil || !ok {
				err = gerr
				break
			}
			b.saved = append(b.saved, d)
		}
		if err == nil {
			if _, err = ch.QueueDelete(b.dead, false, true, false); err == nil {
				ch.Close()
				return nil
			}
		}
		ch.Close() // a copy arrived meanwhile (the delete if-empty refused): take it out too
	}
	return fmt.Errorf("deleting %s while empty: %w", b.dead, err)
}

func (b *amqpBackend) lockRow(context.Context, int64, time.Duration) error {
	return errors.New("rabbitmq has no rows to lock")
}

// cleanup deletes the trial's queues.
func (b *amqpBackend) cleanup(ctx context.Context) {
	for _, q := range []string{b.queue, b.retry, b.dead} {
		if ch, err := b.channel(ctx); err == nil {
			_, _ = ch.QueueDelete(q, false, false, false)
			ch.Close()
		}
	}
	if b.conn != nil {
		b.conn.Close()
	}
}

func (b *amqpBackend) strictAttempts() bool { return b.queueType == "quorum" }

// handledToCap (chaos.Expect.HandledToCap): a classic queue counts only what settle can prove —
// its own count header, and the redelivered flag of a delivery the process handed out itself —
// so a message that always fails reaches its dead letter after a handler run of every attempt
// up to the cap, crashes and broker restarts or not. A quorum queue counts deliveries on the
// server, crashes included (chargePerCrash).
func handledToCap(b backend) bool {
	ab, ok := b.(*amqpBackend)
	return ok && ab.queueType == "classic"
}
func (b *amqpBackend) sideRows() bool { return false }
