package amqp_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/ops/opstest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// rabbit is a test's raw amqp091-go client (RabbitMQ's own Go client) and its queues, deleted
// when the test ends.
type rabbit struct {
	t      testing.TB
	conn   *amqp091.Connection
	prefix string
}

var opsSeq atomic.Int64

func newRabbit(t testing.TB) *rabbit {
	t.Helper()
	realServer(t)
	c, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	r := &rabbit{t: t, conn: c, prefix: "settle-ops-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(opsSeq.Add(1), 10) + "-"}
	t.Cleanup(func() { _ = c.Close() })
	return r
}

// declare declares a durable queue (quorum when asked) and deletes it after the test.
func (r *rabbit) declare(name string, quorum bool, args amqp091.Table) string {
	r.t.Helper()
	n := r.prefix + name
	if args == nil {
		args = amqp091.Table{}
	}
	if quorum {
		args["x-queue-type"] = "quorum"
	}
	ch := r.channel()
	defer ch.Close()
	if _, err := ch.QueueDeclare(n, true, false, false, false, args); err != nil {
		r.t.Fatalf("declaring %s: %v", n, err)
	}
	r.t.Cleanup(func() {
		if c, err := amqp091.Dial(url); err == nil {
			if ch, err := c.Channel(); err == nil {
				_, _ = ch.QueueDelete(n, false, false, false)
			}
			_ = c.Close()
		}
	})
	return n
}

func (r *rabbit) channel() *amqp091.Channel {
	r.t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	return ch
}

// publish publishes to queue with confirmation.
func (r *rabbit) publish(queue string, msg amqp091.Publishing) {
	r.t.Helper()
	ch := r.channel()
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		r.t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, msg)
	if err != nil || !dc.Wait() {
		r.t.Fatalf("publishing to %s: %v (confirmed: %v)", queue, err, err == nil)
	}
}

// peek reads every ready message of queue without taking it (basic.get, then the channel's
// close returns them).
func (r *rabbit) peek(queue string) []amqp091.Delivery {
	r.t.Helper()
	ch := r.channel()
	defer ch.Close()
	var out []amqp091.Delivery
	for {
		m, ok, err := ch.Get(queue, false)
		if err != nil {
			r.t.Fatalf("reading %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

func (r *rabbit) depth(queue string) int {
	r.t.Helper()
	ch := r.channel()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return q.Messages
}

func (r *rabbit) ops(queue, dead string, opts ...amqp.OpsOption) *amqp.Ops {
	r.t.Helper()
	conn, err := amqp.URL(url)()
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = conn.Close() })
	o, err := amqp.NewOps(context.Background(), conn, queue, dead, opts...)
	if err != nil {
		r.t.Fatalf("NewOps(%s, %s): %v", queue, dead, err)
	}
	return o
}

func table(h map[string]string) amqp091.Table {
	t := amqp091.Table{}
	for k, v := range h {
		t[k] = v
	}
	return t
}

// TestOps runs the operations suite on the real RabbitMQ, reading back with amqp091-go: on a
// classic queue and on a quorum queue, each with a classic dead-letter queue (what
// DeclareTopology declares for both).
func TestOps(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			opstest.Run(t, opstest.Features{Ready: true, Dead: true}, func(t *testing.T) opstest.Backend {
				r := newRabbit(t)
				queue, dead := r.declare("refunds", k.quorum, nil), r.declare("refunds.dead", false, nil)
				var n atomic.Int64
				read := func(q string) []opstest.Message {
					var out []opstest.Message
					for _, m := range r.peek(q) {
						c, _ := m.Headers[amqp.RetryCountHeader].(string)
						a, _ := strconv.Atoi(c)
						out = append(out, opstest.Message{Payload: m.Body, Attempts: a})
					}
					return out
				}
				return opstest.Backend{
					Queue:  r.ops(queue, dead),
					Origin: queue,
					AddDead: func(t testing.TB, payload []byte, h map[string]string) string {
						id := "m-" + strconv.FormatInt(n.Add(1), 10)
						r.publish(dead, amqp091.Publishing{MessageId: id, Body: payload, Headers: table(h), DeliveryMode: amqp091.Persistent})
						return id
					},
					AddReady: func(t testing.TB, payload []byte) {
						r.publish(queue, amqp091.Publishing{MessageId: "r-" + strconv.FormatInt(n.Add(1), 10), Body: payload})
					},
					Ready: func(t testing.TB) []opstest.Message { return read(queue) },
					Dead: func(t testing.TB) [][]byte {
						var out [][]byte
						for _, m := range read(dead) {
							out = append(out, m.Payload)
						}
						return out
					},
				}
			})
		})
	}
}

// TestOpsStats counts the waiting queue as delayed, and reports what AMQP cannot measure.
func TestOpsStats(t *testing.T) {
	r := newRabbit(t)
	queue := r.declare("refunds", false, nil)
	dead := r.declare("refunds.dead", false, nil)
	o := r.ops(queue, dead)
	s, err := o.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Measured(ops.FigureDelayed) || s.Measured(ops.FigureInFlight) || s.Measured(ops.FigureOldestReady) {
		t.Errorf("without a waiting queue: unmeasured %v; want delayed, in_flight and oldest_ready", s.Unmeasured)
	}
	waiting := r.declare("refunds.retry", false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue})
	for i := range 2 {
		r.publish(waiting, amqp091.Publishing{Body: []byte(strconv.Itoa(i)), Expiration: "3600000"})
	}
	r.publish(queue, amqp091.Publishing{Body: []byte("ready")})
	if s, err = o.Stats(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Ready != 1 || s.Delayed != 2 || !s.Measured(ops.FigureDelayed) || s.Dead != 0 {
		t.Errorf("stats: ready %d, delayed %d, dead %d, unmeasured %v; want 1, 2, 0", s.Ready, s.Delayed, s.Dead, s.Unmeasured)
	}
	named := r.declare("refunds.slow", false, nil)
	r.publish(named, amqp091.Publishing{Body: []byte("slow"), Expiration: "3600000"})
	if s, err = r.ops(queue, dead, amqp.OpsWaitingQueues(waiting, named)).Stats(context.Background()); err != nil || s.Delayed != 3 {
		t.Errorf("with two named waiting queues: delayed %d, %v; want 3", s.Delayed, err)
	}
	conn, _ := amqp.URL(url)()
	defer conn.Close()
	if _, err := amqp.NewOps(context.Background(), conn, r.prefix+"nowhere", dead); !errors.Is(err, ops.ErrTargetNotFound) ||
		!strings.Contains(err.Error(), "nowhere") {
		t.Errorf("NewOps on a missing queue: %v, want ErrTargetNotFound naming it", err)
	}
}

// TestOpsRedriveReturned: a dead letter whose origin queue is gone is returned by the broker
// (mandatory); Redrive stops with ErrReturned and the dead letter stays.
func TestOpsRedriveReturned(t *testing.T) {
	r := newRabbit(t)
	queue, dead := r.declare("refunds", false, nil), r.declare("refunds.dead", false, nil)
	h := core.DeadLetterInfo{Count: 3, Origin: r.prefix + "gone", At: time.Now(), Error: "boom"}.Headers()
	r.publish(dead, amqp091.Publishing{MessageId: "lost-origin", Body: []byte("x"), Headers: table(h)})
	n, err := r.ops(queue, dead).Redrive(context.Background(), ops.All(), ops.RedriveOptions{})
	if !errors.Is(err, amqp.ErrReturned) || n != 0 {
		t.Errorf("Redrive to a missing queue = %d, %v; want 0 and ErrReturned", n, err)
	}
	if got := r.depth(dead); got != 1 {
		t.Errorf("dead-letter queue holds %d after a returned redrive, want 1", got)
	}
}

// TestOpsBrokerDeadLettered reads why a message died from x-death when the broker moved it
// (here: rejected without requeue on a queue whose DLX is the dead-letter queue).
func TestOpsBrokerDeadLettered(t *testing.T) {
	r := newRabbit(t)
	dead := r.declare("refunds.dead", false, nil)
	queue := r.declare("refunds", false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
	r.publish(queue, amqp091.Publishing{MessageId: "rejected-1", Body: []byte("x")})
	ch := r.channel()
	m, ok, err := ch.Get(queue, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := m.Reject(false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	d, err := r.ops(queue, dead).GetDead(context.Background(), "rejected-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Origin != queue || !strings.Contains(d.Reason, "rejected") || d.DeadAt.IsZero() {
		t.Errorf("broker-moved dead letter: origin %q, reason %q, dead at %v; want %q, rejected, a time", d.Origin, d.Reason, d.DeadAt, queue)
	}
}

// TestOpsEndToEnd: a subscription moves a failing message to its dead letter; ListDead shows
// why, Redrive sends it back, and the subscription then processes it.
func TestOpsEndToEnd(t *testing.T) {
	r := newRabbit(t)
	queue, dead := r.declare("refunds", false, nil), r.declare("refunds.dead", false, nil)
	var up atomic.Bool
	handled := make(chan int, 4)
	deadLettered := make(chan struct{}, 1)
	app := core.New(core.WithLogger(testLogger()), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) {
		if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
			deadLettered <- struct{}{}
		}
	}))
	br, err := amqp.New(amqp.URL(url), amqp.WithLogger(app.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(br)
	q, err := amqp.Classic(br, queue)
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, q, func(ctx context.Context, m *core.Message[[]byte]) error {
		if !up.Load() {
			return core.Retry().Because(errors.New("card processor timeout"))
		}
		handled <- m.Attempt()
		return nil
	}, core.WithCodec(core.Raw), core.DeadLetterAfter(2, dead)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	r.publish(queue, amqp091.Publishing{MessageId: "refund-1", Body: []byte(`{"refund":1}`)})

	o := r.ops(queue, dead)
	select {
	case <-deadLettered:
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the message was not dead-lettered")
	}
	page, err := o.ListDead(ctx, ops.Filter{}, ops.Page{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListDead = %+v, %v; want the one dead letter", page, err)
	}
	d := page.Items[0]
	if d.ID != "refund-1" || d.Origin != queue || d.Count != 2 || !strings.Contains(d.Reason, "card processor timeout") {
		t.Errorf("dead letter: %+v", d)
	}
	up.Store(true)
	if n, err := o.Redrive(ctx, ops.IDs("refund-1"), ops.RedriveOptions{}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	select {
	case a := <-handled:
		if a != 1 {
			t.Errorf("the redriven message came back as attempt %d, want 1", a)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the redriven message was not processed")
	}
	if got := r.depth(dead); got != 0 {
		t.Errorf("dead-letter queue holds %d after the redrive", got)
	}
}

// TestOpsQuorumDeadLetterQueue redrives from a quorum dead-letter queue (declared by the user):
// reading it raises the messages' x-delivery-count, which the redriven copies do not carry.
func TestOpsQuorumDeadLetterQueue(t *testing.T) {
	r := newRabbit(t)
	queue, dead := r.declare("refunds", false, nil), r.declare("refunds.dead", true, nil)
	for i := range 3 {
		h := core.DeadLetterInfo{Count: 4, Origin: queue, At: time.Now(), Error: "boom"}.Headers()
		r.publish(dead, amqp091.Publishing{MessageId: "q-" + strconv.Itoa(i), Body: []byte(strconv.Itoa(i)), Headers: table(h)})
	}
	n, err := r.ops(queue, dead).Redrive(context.Background(), ops.IDs("q-0", "q-2"), ops.RedriveOptions{KeepAttempts: true})
	if err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v; want 2", n, err)
	}
	back := r.peek(queue)
	if len(back) != 2 {
		t.Fatalf("the queue holds %d messages, want 2", len(back))
	}
	for _, m := range back {
		if m.Headers[amqp.RetryCountHeader] != "4" || m.Headers["x-delivery-count"] != nil || m.Headers[core.HeaderError] != nil {
			t.Errorf("redriven copy %s has headers %v; want the count 4 kept, no x-delivery-count, no dead-letter headers", m.MessageId, m.Headers)
		}
	}
}
