package amqp

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// RetrySuffix is appended to a queue's name to name its DLXTTL waiting queue.
const RetrySuffix = ".retry"

// DLXTTL makes RetryAfter copies of the queue wait on the server, in the waiting queue
// "<queue>.retry": the copy (settle-retry-count raised) is published there through the default
// exchange with a per-message expiration of the delay in milliseconds (rounded up), confirmed
// (under the default publish policy), then the original is acknowledged. The waiting queue is a
// quorum queue without a consumer (WaitingQueue.Args): its x-dead-letter-exchange "" and
// x-dead-letter-routing-key "<queue>" send each copy back to the queue when it expires,
// at-least-once (x-dead-letter-strategy, with x-overflow=reject-publish), so a copy survives a
// restart of the service and a stop or crash of the broker, even in the middle of its move
// home. The cap (core.DeadLetterAfter) stops a delayed loop exactly like an immediate one,
// because every copy carries its raised count. Per-message TTL on quorum queues needs RabbitMQ
// 3.10 or later.
//
// RabbitMQ expires messages only at the head of a queue: a copy waits at least its own delay
// and at most until every copy ahead of it has expired. A long delay at the head holds up every
// shorter one behind it — in the package's test, a 5 s copy behind a 60 s one came back after
// 60 s, not 5 s (on RabbitMQ 3.10, 200 ms behind 1.5 s came back after about 1.5 s). One
// waiting queue therefore serves one delay class: a subscription whose delays vary widely
// should use the delayed-message exchange (module transport-amqp-dme), or split its work over
// queues with a waiting queue each (DLXTTLNamed).
//
// On a quorum queue the copy is a new message, whose server count (x-delivery-count) starts
// over; settle counts the attempt across copies (settle-retry-count + x-delivery-count + 1) and
// moves a delivery that reached the cap of core.DeadLetterAfter to the destination itself (a
// copy with the final count), so the cap stops a delayed loop there too.
//
// With DeclareTopology(true) the waiting queue is declared with the subscription's queue (one
// left from an older settle, a classic queue, is refused by the server: delete it once its
// copies have gone home). Otherwise the subscription reads its arguments back without
// declaring and refuses to start unless it exists with WaitingQueue.Args.
func DLXTTL() QueueOption {
	return queueOption(func(c *queueConfig) error {
		if err := validName("amqp.DLXTTL: waiting queue", c.name+RetrySuffix); err != nil {
			return err
		}
		return WithDelay(WaitingQueue("")).applyClassic(c)
	})
}

// DLXTTLNamed is DLXTTL with the waiting queue called name instead of "<queue>.retry": a
// waiting queue releases only from its head, so each delay class gets a queue of its own. The
// waiting queue routes back to exactly one queue, so a name serves one subscribed queue.
func DLXTTLNamed(name string) QueueOption {
	return queueOption(func(c *queueConfig) error {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("amqp.DLXTTLNamed(%q): the waiting queue's name is empty", name)
		}
		if strings.HasPrefix(name, "amq.") {
			return fmt.Errorf("amqp.DLXTTLNamed(%q): the amq. prefix is reserved by RabbitMQ", name)
		}
		if err := validName("amqp.DLXTTLNamed: waiting queue", name); err != nil {
			return err
		}
		if name == c.name {
			return fmt.Errorf("amqp.DLXTTLNamed(%q): the waiting queue cannot be the queue itself", name)
		}
		return WithDelay(WaitingQueue(name)).applyClassic(c)
	})
}

// WaitingQueue is the Delay of DLXTTL and DLXTTLNamed: a queue of that name (the empty name
// means "<queue>.retry") that holds copies until their per-message TTL runs out and then
// dead-letters them back to the queue.
type WaitingQueue string

var _ Delay = WaitingQueue("")

// Name returns the waiting queue's name for the subscribed queue.
func (w WaitingQueue) Name(queue string) string {
	if w == "" {
		return queue + RetrySuffix
	}
	return string(w)
}

// Args are the waiting queue's arguments: a quorum queue whose expired copies go back to queue
// through the default exchange, dead-lettered at-least-once (x-dead-letter-strategy, which
// needs x-overflow=reject-publish): a copy in the middle of its move home when the broker stops
// or crashes stays in the waiting queue and is moved again, where a classic queue's
// dead-lettering, at-most-once, would lose it. Per-message TTL on quorum queues needs RabbitMQ
// 3.10 or later; like a classic queue, a quorum queue expires messages only at its head.
func (w WaitingQueue) Args(queue string) amqp091.Table {
	return amqp091.Table{
		"x-queue-type":              "quorum",
		"x-dead-letter-strategy":    "at-least-once",
		"x-overflow":                "reject-publish",
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": queue,
	}
}

// verify checks the arguments of a waiting queue declared elsewhere (read with
// queueArguments): a quorum queue that dead-letters at-least-once back to queue.
func (w WaitingQueue) verify(queue string, got amqp091.Table) error {
	want := w.Args(queue)
	var missing []string
	for _, k := range []string{"x-queue-type", "x-dead-letter-strategy", "x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key"} {
		if v, ok := argString(got, k); !ok || v != want[k] {
			have := "none"
			if g, ok := got[k]; ok {
				have = fmt.Sprintf("%v", g)
			}
			missing = append(missing, fmt.Sprintf("%s=%v (has %s)", k, want[k], have))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &TopologyError{Kind: "waiting queue", Name: w.Name(queue), Declared: want,
		Problem: fmt.Sprintf("lacks %s: settle relies on it to send expired copies back to %q at-least-once, so that a broker stop or crash in the middle of that move loses nothing; "+
			"declare it with these arguments (a queue's arguments cannot change: delete it once its copies have gone home, then declare it again), or mount with amqp.DeclareTopology(true)",
			strings.Join(missing, ", "), queue)}
}

// Ensure declares the waiting queue (durable, with Args) or checks passively that it exists.
func (w WaitingQueue) Ensure(ch Channel, queue string, declare bool) error {
	name, args := w.Name(queue), w.Args(queue)
	if err := validName("amqp.DLXTTL: waiting queue", name); err != nil {
		return err
	}
	var err error
	if declare {
		_, err = ch.QueueDeclare(name, true, false, false, false, args)
		if isCode(err, amqp091.PreconditionFailed) {
			return &TopologyError{Kind: "waiting queue", Name: name, Declared: args, Err: err,
				Problem: fmt.Sprintf("exists with other arguments (the server: %v); waiting queues are quorum queues that dead-letter at-least-once since settle's broker-restart hardening: delete this one once its copies have gone home (it then holds none), and settle declares it again", err)}
		}
	} else {
		_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
		args = nil
	}
	if err != nil {
		return topologyErr("waiting queue", name, args, err)
	}
	return nil
}

// Route sends the copy to the waiting queue (default exchange) with the delay as its
// per-message expiration in milliseconds, rounded up.
func (w WaitingQueue) Route(queue string, delay time.Duration, msg *amqp091.Publishing) (exchange, key string) {
	msg.Expiration = strconv.FormatInt(msCeil(delay), 10)
	return "", w.Name(queue)
}

// Where names the waiting queue.
func (w WaitingQueue) Where(queue string) string {
	return fmt.Sprintf("waiting queue %q (per-message TTL, dead-lettered back to %q)", w.Name(queue), queue)
}
