package amqp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
)

// Ops is the operations view (ops.Queue) of a RabbitMQ queue, its waiting queues and its
// dead-letter queue, through AMQP alone (no management plugin).
//
// Stats passively declares each queue: queue.declare-ok counts its ready messages. Ready is the
// queue's count, Delayed the sum of its waiting queues' (DLXTTL), Dead the dead-letter queue's.
// RabbitMQ reports unacknowledged messages, and the messages a quorum queue is dead-lettering
// (at-least-once, while the destination is full or missing: out of the ready count and out of
// consumers' sight), only through its management plugin: with OpsCounts (ManagementAPI) they are
// InFlight and DeadLettering, without it both are reported unmeasured. The age of the oldest
// message RabbitMQ tells only by delivering it, so OldestReady is unmeasured.
//
// Listing and showing read the dead-letter queue with basic.get without acknowledging, then
// close the channel, which returns every message read to its place. That is not free: each
// message read is redelivered (its redelivered flag is set, and a consumer of the dead-letter
// queue counts one more delivery); on a quorum dead-letter queue each read raises its
// x-delivery-count, and a delivery limit on that queue would eventually drop or move it. A
// listing reads the queue from its head up to the page asked for, so late pages cost more;
// cursors are positions, which move when the queue changes between pages. A quorum queue puts
// returned messages back asynchronously, so a read that follows another at once may briefly
// see fewer messages; settle declares dead-letter queues as classic queues, which return them
// before the channel's close completes.
//
// A dead letter's id is its message id, or "sha256:" and a digest of its body and headers when
// it has none (two copies of one message share an id, and are selected together). A dead letter
// settle moved is described by its settle-* headers; one RabbitMQ moved itself by the latest
// entry of its x-death (origin, time, reason) and, at a quorum queue's delivery limit, by its
// count: its earlier copies' settle-retry-count plus the deliveries the queue counted (the
// dead letter's x-delivery-count, or the queue's x-delivery-limit + 1, read from the server once
// per Ops).
//
// Redrive reads the dead-letter queue with basic.get on a confirm-mode channel and republishes
// each selected message (in windows of 100 in flight) to its origin queue (its settle-origin header, or the x-death of a
// message the broker moved, or this queue) through the default exchange, mandatory, and
// acknowledges the dead letter only once RabbitMQ has confirmed the copy and not returned it.
// Interrupted at any point — the process killed, the connection cut — nothing is lost: a
// dead letter is either still in the dead-letter queue (unacknowledged ones return), or its
// copy is confirmed in the origin queue, or both (a duplicate, when the interruption fell
// between the confirmation and the acknowledgement). A copy the broker returns (no such queue)
// or nacks stops the redrive with an error, and the dead letter stays.
type Ops struct {
	conn    Connection
	queue   string
	dead    string
	waiting []string
	named   bool // waiting queues named by OpsWaitingQueues: a missing one is an error
	clock   clock.Clock
	counts  QueueCounter // OpsCounts; nil: in flight and dead-lettering are not measured

	limitMu sync.Mutex
	limits  map[string]int // quorum queues' delivery limits read from the server (-1: none)
}

var _ ops.Queue = (*Ops)(nil)

// OpsOption configures an Ops.
type OpsOption func(*Ops) error

// OpsWaitingQueues names the queue's waiting queues (DLXTTLNamed); by default Stats counts
// "<queue>.retry" (DLXTTL) when it exists.
func OpsWaitingQueues(names ...string) OpsOption {
	return func(o *Ops) error {
		for _, n := range names {
			if err := validName("amqp.OpsWaitingQueues", n); err != nil || n == "" {
				return fmt.Errorf("amqp.OpsWaitingQueues(%q): not a queue name", n)
			}
		}
		o.waiting, o.named = names, true
		return nil
	}
}

// OpsCounts measures the queue's in-flight and dead-lettering messages with c (ManagementAPI
// for a real RabbitMQ): Stats.InFlight is its unacknowledged count and Stats.DeadLettering its
// messages that are neither ready nor unacknowledged — on a quorum queue, those RabbitMQ is
// dead-lettering at-least-once and has not delivered yet (the destination is full or missing).
// Without it both figures are reported unmeasured: AMQP counts ready messages only.
func OpsCounts(c QueueCounter) OpsOption {
	return func(o *Ops) error {
		if c == nil {
			return errors.New("amqp.OpsCounts(nil): no counter")
		}
		o.counts = c
		return nil
	}
}

// OpsClock takes the time of Stats from c (default: the wall clock).
func OpsClock(c clock.Clock) OpsOption {
	return func(o *Ops) error {
		if c == nil {
			return errors.New("amqp.OpsClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// NewOps returns the operations view of queue, whose dead-letter queue is dead ("" for none),
// on conn (Dial). It checks that the queues exist: a missing one gives an error matching
// ops.ErrTargetNotFound. The caller keeps conn and closes it.
func NewOps(ctx context.Context, conn Connection, queue, dead string, opts ...OpsOption) (*Ops, error) {
	if conn == nil {
		return nil, errors.New("amqp.NewOps: nil connection")
	}
	if queue == "" {
		return nil, errors.New("amqp.NewOps: no queue named")
	}
	for _, n := range []string{queue, dead} {
		if err := validName("amqp.NewOps: queue", n); err != nil {
			return nil, err
		}
	}
	if dead == queue {
		return nil, fmt.Errorf("amqp.NewOps: queue %q cannot be its own dead-letter queue", queue)
	}
	o := &Ops{conn: conn, queue: queue, dead: dead, waiting: []string{queue + RetrySuffix}, clock: clock.Real()}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("amqp.NewOps: nil option")
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	for _, n := range []string{queue, dead} {
		if n == "" {
			continue
		}
		if _, err := o.depth(n); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// depth passively declares queue on a channel of its own (a missing queue closes the channel)
// and returns its ready messages.
func (o *Ops) depth(queue string) (int64, error) {
	ch, err := o.conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("amqp: opening a channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		if isCode(err, amqp091.NotFound) {
			return 0, &ops.TargetError{What: fmt.Sprintf("queue %q", queue), Why: "no such queue on the server"}
		}
		return 0, fmt.Errorf("amqp: queue %q: %w", queue, err)
	}
	return int64(q.Messages), nil
}

// Stats counts the ready messages of the queue, its waiting queues and its dead-letter queue.
func (o *Ops) Stats(ctx context.Context) (ops.Stats, error) {
	s := ops.Stats{Queue: o.queue, DeadLetter: o.dead, At: o.clock.Now().UTC()}
	var err error
	if s.Ready, err = o.depth(o.queue); err != nil {
		return s, err
	}
	found := 0
	for _, w := range o.waiting {
		n, err := o.depth(w)
		if errors.Is(err, ops.ErrTargetNotFound) && !o.named {
			continue
		}
		if err != nil {
			return s, fmt.Errorf("amqp: waiting queue: %w", err)
		}
		s.Delayed += n
		found++
	}
	if found == 0 {
		s.Unmeasured = append(s.Unmeasured, ops.Unmeasured{Figure: ops.FigureDelayed,
			Why: fmt.Sprintf("no waiting queue (%s): copies delayed in the process or in a delayed-message exchange cannot be counted", strings.Join(o.waiting, ", "))})
	}
	o.countOthers(ctx, &s)
	s.Unmeasured = append(s.Unmeasured,
		ops.Unmeasured{Figure: ops.FigureOldestReady, Why: "RabbitMQ tells a message's age only by delivering it, which would count as an attempt"})
	if o.dead == "" {
		s.Unmeasured = append(s.Unmeasured, ops.Unmeasured{Figure: ops.FigureDead, Why: "no dead-letter queue named"})
		return s, nil
	}
	s.Dead, err = o.depth(o.dead)
	return s, err
}

// countOthers measures the figures AMQP cannot, in flight and dead-lettering, through the
// Ops's QueueCounter, or reports them unmeasured with why.
func (o *Ops) countOthers(ctx context.Context, s *ops.Stats) {
	if o.counts == nil {
		s.Unmeasured = append(s.Unmeasured,
			ops.Unmeasured{Figure: ops.FigureInFlight, Why: "queue.declare-ok counts ready messages only; unacknowledged ones are counted by the management plugin (amqp.OpsCounts with amqp.ManagementAPI)"},
			ops.Unmeasured{Figure: ops.FigureDeadLettering, Why: "queue.declare-ok counts ready messages only; the messages a quorum queue is dead-lettering while their destination is full or missing are counted by the management plugin (amqp.OpsCounts with amqp.ManagementAPI)"})
		return
	}
	c, err := o.counts.QueueCounts(ctx, o.queue)
	if err != nil {
		why := "the queue's counts could not be read: " + err.Error()
		s.Unmeasured = append(s.Unmeasured, ops.Unmeasured{Figure: ops.FigureInFlight, Why: why}, ops.Unmeasured{Figure: ops.FigureDeadLettering, Why: why})
		return
	}
	s.InFlight, s.DeadLettering = c.Unacknowledged, c.DeadLettering()
}

// deadLetter describes a delivery read from the dead-letter queue: from settle's dead-letter
// headers when settle moved it, otherwise from the x-death RabbitMQ wrote when it moved it
// itself (serverDeath).
func (o *Ops) deadLetter(m *amqp091.Delivery) ops.DeadLetter {
	d := ops.DeadLetter{Payload: m.Body, Headers: make(map[string]string, len(m.Headers)), Created: m.Timestamp}
	for k, v := range m.Headers {
		switch x := v.(type) {
		case string:
			d.Headers[k] = x
		case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, bool, float32, float64:
			d.Headers[k] = fmt.Sprint(x)
		case time.Time:
			d.Headers[k] = x.UTC().Format(time.RFC3339)
		}
	}
	_, byServer := m.Headers["x-death"]
	_, origin := m.Headers[core.HeaderOrigin]
	_, at := m.Headers[core.HeaderDeadAt]
	if byServer && !origin && !at {
		o.serverDeath(m, &d)
	} else {
		_ = d.ReadHeaders() // a malformed settle header leaves its field unset
	}
	d.ID = m.MessageId
	if d.ID == "" {
		d.ID = digest(m)
	}
	return d
}

// digest names a message without a message id by its body and headers.
func digest(m *amqp091.Delivery) string {
	h := sha256.New()
	h.Write(m.Body)
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%s=%v", k, m.Headers[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:24]
}

// reader reads the dead-letter queue on a channel of its own, holding what it reads
// unacknowledged until Close returns it.
type reader struct {
	o     *Ops
	ch    Channel
	limit int64 // the queue's depth when the read began: no message is read twice
	read  int64
}

func (o *Ops) reader() (*reader, error) {
	if o.dead == "" {
		return nil, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.queue)
	}
	n, err := o.depth(o.dead)
	if err != nil {
		return nil, err
	}
	ch, err := o.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("amqp: opening a channel: %w", err)
	}
	return &reader{o: o, ch: ch, limit: n}, nil
}

// next reads the next dead letter; ok is false at the end of the queue as it was.
func (r *reader) next(ctx context.Context) (m amqp091.Delivery, ok bool, err error) {
	if r.read >= r.limit {
		return m, false, nil
	}
	if err := ctx.Err(); err != nil {
		return m, false, err
	}
	m, ok, err = r.ch.Get(r.o.dead, false)
	if err != nil {
		return m, false, fmt.Errorf("amqp: reading dead-letter queue %q: %w", r.o.dead, err)
	}
	if ok {
		r.read++
	}
	return m, ok, nil
}

// close returns every message read and not acknowledged to the queue.
func (r *reader) close() { _ = r.ch.Close() }

// ListDead reads the dead-letter queue from its head and returns the page f matches; the
// cursor is the position after the page's last message.
func (o *Ops) ListDead(ctx context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	skip := int64(0)
	if p.After != "" {
		n, err := strconv.ParseInt(p.After, 10, 64)
		if err != nil || n < 0 {
			return ops.DeadPage{}, fmt.Errorf("amqp: listing cursor %q is not a position", p.After)
		}
		skip = n
	}
	r, err := o.reader()
	if err != nil {
		return ops.DeadPage{}, err
	}
	defer r.close()
	var page ops.DeadPage
	for {
		m, ok, err := r.next(ctx)
		if err != nil {
			return ops.DeadPage{}, err
		}
		if !ok {
			return page, nil
		}
		if r.read <= skip {
			continue
		}
		d := o.deadLetter(&m)
		if !f.Match(d) {
			continue
		}
		if len(page.Items) == p.LimitOf() {
			page.Next = strconv.FormatInt(r.read-1, 10)
			return page, nil
		}
		page.Items = append(page.Items, d)
	}
}

// GetDead reads the dead-letter queue until the message with id.
func (o *Ops) GetDead(ctx context.Context, id string) (ops.DeadLetter, error) {
	r, err := o.reader()
	if err != nil {
		return ops.DeadLetter{}, err
	}
	defer r.close()
	for {
		m, ok, err := r.next(ctx)
		if err != nil {
			return ops.DeadLetter{}, err
		}
		if !ok {
			return ops.DeadLetter{}, &ops.NotFoundError{DeadLetter: fmt.Sprintf("queue %q", o.dead), IDs: []string{id}}
		}
		if d := o.deadLetter(&m); d.ID == id {
			return d, nil
		}
	}
}

// selected reads the dead-letter queue and calls fn with each selected message, in order; for
// a selection of ids it first reads the whole queue (holding it) and calls fn only when every
// id was found.
func (o *Ops) selected(ctx context.Context, r *reader, s ops.Selection, fn func(m *amqp091.Delivery, d ops.DeadLetter) error) error {
	var held []amqp091.Delivery
	found := map[string]bool{}
	for {
		m, ok, err := r.next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		d := o.deadLetter(&m)
		if !s.Match(d) {
			continue
		}
		if len(s.IDs) == 0 {
			if err := fn(&m, d); err != nil {
				return err
			}
			continue
		}
		found[d.ID] = true
		held = append(held, m)
	}
	var missing []string
	for _, id := range s.IDs {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return &ops.NotFoundError{DeadLetter: fmt.Sprintf("queue %q", o.dead), IDs: missing}
	}
	for i := range held {
		if err := fn(&held[i], o.deadLetter(&held[i])); err != nil {
			return err
		}
	}
	return nil
}

// returner is the optional NotifyReturn of a Channel (amqp091-go's channels have it).
type returner interface {
	NotifyReturn(c chan amqp091.Return) chan amqp091.Return
}

// ErrReturned is matched by the error of a redrive whose copy RabbitMQ returned as unroutable
// (mandatory): its origin queue does not exist. The dead letter stays.
var ErrReturned = errors.New("the broker returned the copy as unroutable")

// redriveWindow is how many copies Redrive has in flight before it waits for their
// confirmations: one round trip per window instead of per message.
const redriveWindow = 100

// Redrive republishes the selected dead letters to their origin queues, each confirmed and
// not returned before its dead letter is acknowledged (see Ops). Copies go out in windows of
// redriveWindow; a window in which any copy is returned or nacked acknowledges none of its
// dead letters (those whose copies were stored are then duplicated, never lost).
func (o *Ops) Redrive(ctx context.Context, s ops.Selection, opt ops.RedriveOptions) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	r, err := o.reader()
	if err != nil {
		return 0, err
	}
	defer r.close()
	rt, ok := r.ch.(returner)
	if !ok {
		return 0, errors.New("amqp: Redrive needs a channel that reports returned messages (NotifyReturn), as amqp.Dial's do")
	}
	// The client blocks its reader on a full listener: room for a window's returns.
	returns := rt.NotifyReturn(make(chan amqp091.Return, redriveWindow+1))
	if err := r.ch.Confirm(false); err != nil {
		return 0, fmt.Errorf("amqp: confirm mode for redriving: %w", err)
	}
	type inFlight struct {
		tag uint64
		id  string
		to  string
		dc  DeferredConfirmation
	}
	var window []inFlight
	moved := 0
	flush := func() error {
		if len(window) == 0 {
			return nil
		}
		for _, f := range window {
			if err := waitConfirm(ctx, f.dc); err != nil {
				return fmt.Errorf("amqp: redriving dead letter %s to queue %q: %w; it stays in %q", f.id, f.to, err, o.dead)
			}
		}
		// A return is sent before the confirmation of its publishing, and the client hands it
		// to the listener before it reads that confirmation: every return of the window is here.
		select {
		case ret := <-returns:
			return fmt.Errorf("amqp: redriving dead letter %s to queue %q: %w (%d %s); it and the rest of its batch stay in %q",
				ret.MessageId, ret.RoutingKey, ErrReturned, ret.ReplyCode, ret.ReplyText, o.dead)
		default:
		}
		ids := make([]string, 0, len(window))
		for _, f := range window {
			if err := r.ch.Ack(f.tag, false); err != nil {
				return fmt.Errorf("amqp: acknowledging redriven dead letter %s (its copy is in %q): %w", f.id, f.to, err)
			}
			moved++
			ids = append(ids, f.id)
		}
		window = window[:0]
		if opt.Moved != nil {
			opt.Moved(ids)
		}
		return nil
	}
	err = o.selected(ctx, r, s, func(m *amqp091.Delivery, d ops.DeadLetter) error {
		to := d.Origin
		if to == "" || to == o.dead {
			to = o.queue
		}
		dc, err := r.ch.PublishWithDeferredConfirmWithContext(ctx, "", to, true, false, redriveCopy(m, opt.KeepAttempts))
		if err != nil {
			return fmt.Errorf("amqp: redriving dead letter %s to queue %q: %w", d.ID, to, err)
		}
		window = append(window, inFlight{tag: m.DeliveryTag, id: d.ID, to: to, dc: dc})
		if len(window) == redriveWindow {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return moved, err
}

// redriveCopy is the message Redrive publishes: the dead letter's body and properties, without
// the broker's death headers and settle's dead-letter headers, and without its count unless
// keep.
func redriveCopy(m *amqp091.Delivery, keep bool) amqp091.Publishing {
	count := -1
	if keep {
		if s, ok := m.Headers[RetryCountHeader].(string); ok {
			if n, err := core.ParseCount(s); err == nil || errors.Is(err, core.ErrCountClamped) {
				count = n
			}
		}
	}
	msg := copyOf(m, max(count, 0))
	for _, k := range []string{core.HeaderOrigin, core.HeaderDeadAt, core.HeaderError} {
		delete(msg.Headers, k)
	}
	if count < 0 {
		delete(msg.Headers, RetryCountHeader)
	}
	return msg
}

// Purge deletes the selected dead letters: all of them with queue.purge, otherwise by
// acknowledging each as it is read.
func (o *Ops) Purge(ctx context.Context, s ops.Selection) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if o.dead == "" {
		return 0, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.queue)
	}
	if s.All {
		ch, err := o.conn.Channel()
		if err != nil {
			return 0, fmt.Errorf("amqp: opening a channel: %w", err)
		}
		defer ch.Close()
		n, err := ch.QueuePurge(o.dead, false)
		if err != nil {
			return 0, fmt.Errorf("amqp: purging queue %q: %w", o.dead, err)
		}
		return n, nil
	}
	r, err := o.reader()
	if err != nil {
		return 0, err
	}
	defer r.close()
	deleted := 0
	err = o.selected(ctx, r, s, func(m *amqp091.Delivery, d ops.DeadLetter) error {
		if err := r.ch.Ack(m.DeliveryTag, false); err != nil {
			return fmt.Errorf("amqp: deleting dead letter %s from %q: %w", d.ID, o.dead, err)
		}
		deleted++
		return nil
	})
	return deleted, err
}
