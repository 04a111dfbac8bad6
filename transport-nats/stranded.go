package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/ops"
)

// Stranded messages.
//
// A work-queue stream removes a message once its consumer has acknowledged or
// terminated it, and the consumer's ack floor says up to which stream sequence everything is
// settled. A message of the consumer's subject that the stream still holds at or below that
// floor is never delivered again: it is stranded. Two things leave one there:
//
//   - a server crash that lost the removal but kept the consumer's record of the settlement:
//     nats-server 2.9 writes JetStream state in the background, and after a SIGKILL it came back
//     with hundreds of such messages (issue 42: 678 of 10,000; the driver of this change saw 875
//     and 939 of 3,000, each one acknowledged, and confirmed, before the crash);
//   - a message that reached the consumer's MaxDeliver: the server stops delivering it, leaves
//     it in the stream, and its ack floor passes it once the messages after it settle.
//
// The consumer's state does not tell the two apart, so a repair neither deletes a stranded
// message (a MaxDeliver one was never handled to the end) nor publishes it back to the queue
// unasked (a crash's one was handled and settled: it would run twice). RepairStranded moves it to
// the queue's dead letter by default — nothing lost, nothing run again — or, asked, back to the
// queue; either way its copy is stored (JetStream's publish acknowledgement) before the original
// is deleted.

// StrandedReason begins the reason (settle-error) of a stranded message RepairStranded moved to
// the dead letter: `settle dead ls --reason stranded` lists them.
const StrandedReason = "stranded"

// StrandedMessage is a message stranded in a queue's stream.
type StrandedMessage struct {
	// Seq is its stream sequence: the id RepairStranded takes.
	Seq uint64 `json:"seq"`
	// ID is its message id: its Nats-Msg-Id, or "<stream>:<sequence>" (Delivery.ID).
	ID string `json:"id"`
	// Stored is when the stream stored it.
	Stored time.Time `json:"stored"`
	// Payload and Headers are the message's.
	Payload []byte            `json:"payload"`
	Headers map[string]string `json:"headers,omitempty"`
}

// StrandedPage is one page of a queue's stranded messages.
type StrandedPage struct {
	// Stream and Consumer name the queue's stream and durable consumer; Floor is the consumer's
	// ack floor (a stream sequence) when the page was read.
	Stream, Consumer string
	Floor            uint64
	// Items are the stranded messages, in stream order.
	Items []StrandedMessage
	// Next continues the listing (ops.Page.After); "" when this was the last page.
	Next string
}

// RepairTo says where RepairStranded moves stranded messages.
type RepairTo uint8

const (
	// RepairToDeadLetter moves each to the queue's dead letter, with the dead-letter headers
	// (settle-origin, settle-dead-at, settle-error saying why; no count: the server's is not
	// readable) and the original's message id as its Nats-Msg-Id, as settle's own dead letters
	// carry: nothing is lost and nothing runs again; the operator redrives or purges it there.
	RepairToDeadLetter RepairTo = iota
	// RepairToQueue publishes each to the queue's subject again, to be delivered and handled as a
	// new message (attempt 1). Its Nats-Msg-Id is "<message id>/stranded/<stream>:<sequence>", so
	// a repair repeated after an interruption, within the stream's duplicate window, stores it once.
	RepairToQueue
)

// String is "dead letter" or "queue".
func (t RepairTo) String() string {
	if t == RepairToQueue {
		return "queue"
	}
	return "dead letter"
}

// StrandedSelection names the stranded messages a repair moves: the listed stream sequences,
// or All of them.
type StrandedSelection struct {
	Seqs []uint64
	All  bool
}

// ErrNotStranded is matched by the error of a repair given a sequence that is not stranded; it
// matches ops.ErrNotFound too.
var ErrNotStranded = errors.New("natsjs: not a stranded message")

// NotStrandedError names the sequences of a repair's selection that are not stranded messages of
// the queue (not in its stream, of another subject, or above the consumer's ack floor): the
// repair moved nothing.
type NotStrandedError struct {
	Stream, Consumer string
	Floor            uint64
	Seqs             []uint64
}

func (e *NotStrandedError) Error() string {
	seqs := make([]string, len(e.Seqs))
	for i, s := range e.Seqs {
		seqs[i] = strconv.FormatUint(s, 10)
	}
	return fmt.Sprintf("natsjs: sequence %s of stream %q: not a stranded message of the queue (not in the stream, another subject's, or above consumer %q's ack floor %d); nothing was repaired",
		strings.Join(seqs, ", "), e.Stream, e.Consumer, e.Floor)
}

// Is makes a NotStrandedError match ErrNotStranded and ops.ErrNotFound.
func (e *NotStrandedError) Is(target error) bool {
	return target == ErrNotStranded || target == ops.ErrNotFound
}

// strandedScope is what finding a queue's stranded messages needs: its stream, and its
// consumer's ack floor and creation time; why says why nothing can be stranded (no consumer
// yet, a stream that keeps acknowledged messages by design), "" when the floor applies.
type strandedScope struct {
	st      jetstream.Stream
	floor   uint64
	created time.Time
	why     string
}

// scope reads the queue's stream and consumer.
func (o *Ops) scope(ctx context.Context) (strandedScope, error) {
	js, err := o.js()
	if err != nil {
		return strandedScope{}, err
	}
	st, err := js.Stream(ctx, o.stream)
	if err != nil {
		return strandedScope{}, fmt.Errorf("natsjs: stream %q: %w", o.stream, err)
	}
	return o.scopeOf(ctx, st)
}

func (o *Ops) scopeOf(ctx context.Context, st jetstream.Stream) (strandedScope, error) {
	sc := strandedScope{st: st}
	if r := st.CachedInfo().Config.Retention; r != jetstream.WorkQueuePolicy {
		sc.why = fmt.Sprintf("stream %q has %v retention: it keeps messages other consumers (or its limits) hold", o.stream, r)
		return sc, nil
	}
	cons, err := st.Consumer(ctx, o.durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		sc.why = fmt.Sprintf("no consumer %q on stream %q yet", o.durable, o.stream)
		return sc, nil
	}
	if err != nil {
		return sc, fmt.Errorf("natsjs: consumer %q of stream %q: %w", o.durable, o.stream, err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return sc, fmt.Errorf("natsjs: consumer %q of stream %q: %w", o.durable, o.stream, err)
	}
	sc.floor, sc.created = ci.AckFloor.Stream, ci.Created
	return sc, nil
}

// firstStranded returns the first message of subject in st at or after sequence from, when it
// lies at or below floor.
func firstStranded(ctx context.Context, st jetstream.Stream, subject string, from, floor uint64) (*jetstream.RawStreamMsg, bool, error) {
	if from > floor {
		return nil, false, nil
	}
	m, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("natsjs: reading stream %q: %w", st.CachedInfo().Config.Name, err)
	}
	return m, m.Sequence <= floor, nil
}

// countStranded counts the stranded messages (Stats): one direct get per stranded message, one
// in all when there is none.
func (o *Ops) countStranded(ctx context.Context, sc strandedScope) (int64, error) {
	var n int64
	for seq := uint64(1); ; {
		m, ok, err := firstStranded(ctx, sc.st, o.subject, seq, sc.floor)
		if err != nil || !ok {
			return n, err
		}
		n++
		seq = m.Sequence + 1
	}
}

// ListStranded reads one page of the queue's stranded messages, in stream order, from the
// cursor (a stream sequence) on. It changes nothing.
func (o *Ops) ListStranded(ctx context.Context, p ops.Page) (StrandedPage, error) {
	page := StrandedPage{Stream: o.stream, Consumer: o.durable}
	seq := uint64(1)
	if p.After != "" {
		n, err := strconv.ParseUint(p.After, 10, 64)
		if err != nil {
			return page, fmt.Errorf("natsjs: listing cursor %q is not a stream sequence", p.After)
		}
		seq = n + 1
	}
	sc, err := o.scope(ctx)
	if err != nil || sc.why != "" {
		return page, err
	}
	page.Floor = sc.floor
	for {
		m, ok, err := firstStranded(ctx, sc.st, o.subject, seq, sc.floor)
		if err != nil || !ok {
			return page, err
		}
		if len(page.Items) == p.LimitOf() {
			page.Next = strconv.FormatUint(page.Items[len(page.Items)-1].Seq, 10)
			return page, nil
		}
		page.Items = append(page.Items, o.strandedOf(m))
		seq = m.Sequence + 1
	}
}

func (o *Ops) strandedOf(m *jetstream.RawStreamMsg) StrandedMessage {
	s := StrandedMessage{Seq: m.Sequence, ID: msgID(m, o.stream), Stored: m.Time, Payload: m.Data}
	if len(m.Header) > 0 {
		s.Headers = make(map[string]string, len(m.Header))
		for k, vs := range m.Header {
			if len(vs) > 0 {
				s.Headers[k] = vs[0]
			}
		}
	}
	return s
}

// msgID is a stored message's id as its deliveries report it (Delivery.ID).
func msgID(m *jetstream.RawStreamMsg, stream string) string {
	if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
		return id
	}
	return stream + ":" + strconv.FormatUint(m.Sequence, 10)
}

// strandedBatch is how many stranded messages a repair finds before it reads the consumer again
// and moves them.
const strandedBatch = 100

// RepairStranded moves the selected stranded messages to the queue's dead letter or back to its
// subject (to), each copy stored before its original is deleted, and returns how many it moved;
// moved, when set, is told each sequence once it is moved. A selection naming a sequence that is
// not stranded moves nothing and gives a *NotStrandedError (matching ops.ErrNotFound).
//
// It reads the consumer's ack floor, finds up to 100 stranded messages, reads the consumer again
// (a consumer deleted and made again, or a floor that went back, stops the repair: nothing below
// the new floor is known to be stranded), then reads each message again by its sequence and
// moves it. The second reading lets a removal that was only late (the server moves the floor
// just before it removes an acknowledged message) land first: such a message is gone and left
// alone. Interrupted, nothing is lost: a message is in the stream, or its copy is stored, or
// both; repeated, a copy already stored is dropped by the destination's duplicate window (two
// minutes by default) and the original deleted.
func (o *Ops) RepairStranded(ctx context.Context, sel StrandedSelection, to RepairTo, moved func(seq uint64)) (int, error) {
	if sel.All == (len(sel.Seqs) > 0) {
		return 0, fmt.Errorf("%w: name stranded messages by stream sequence, or all of them", ops.ErrNoSelection)
	}
	if to == RepairToDeadLetter && o.dead == "" {
		return 0, fmt.Errorf("%w: queue %q: name its dead letter, or repair to the queue (its messages are then handled again)", ops.ErrNoDeadLetter, o.subject)
	}
	js, err := o.js()
	if err != nil {
		return 0, err
	}
	sc, err := o.scope(ctx)
	if err != nil {
		return 0, err
	}
	if sc.why != "" {
		if len(sel.Seqs) > 0 {
			return 0, &NotStrandedError{Stream: o.stream, Consumer: o.durable, Seqs: sel.Seqs}
		}
		return 0, nil
	}
	if len(sel.Seqs) > 0 {
		if err := o.checkSelected(ctx, sc, sel.Seqs); err != nil {
			return 0, err
		}
	}
	r := repair{o: o, js: js, sc: sc, to: to, moved: moved, sel: sel}
	return r.run(ctx)
}

// checkSelected refuses a selection with a sequence that is not stranded.
func (o *Ops) checkSelected(ctx context.Context, sc strandedScope, seqs []uint64) error {
	var not []uint64
	for _, seq := range seqs {
		m, err := sc.st.GetMsg(ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			not = append(not, seq)
		case err != nil:
			return fmt.Errorf("natsjs: reading sequence %d of stream %q: %w", seq, o.stream, err)
		case seq > sc.floor || !covers(o.subject, m.Subject):
			not = append(not, seq)
		}
	}
	if len(not) > 0 {
		return &NotStrandedError{Stream: o.stream, Consumer: o.durable, Floor: sc.floor, Seqs: not}
	}
	return nil
}

// repair is one RepairStranded run.
type repair struct {
	o     *Ops
	js    jetstream.JetStream
	sc    strandedScope
	to    RepairTo
	moved func(uint64)
	sel   StrandedSelection
	n     int
}

func (r *repair) run(ctx context.Context) (int, error) {
	next, listed := uint64(1), 0
	for {
		var seqs []uint64
		if r.sel.All {
			for len(seqs) < strandedBatch {
				m, ok, err := firstStranded(ctx, r.sc.st, r.o.subject, next, r.sc.floor)
				if err != nil {
					return r.n, err
				}
				if !ok {
					break
				}
				seqs, next = append(seqs, m.Sequence), m.Sequence+1
			}
		} else {
			end := min(listed+strandedBatch, len(r.sel.Seqs))
			seqs, listed = r.sel.Seqs[listed:end], end
		}
		if len(seqs) == 0 {
			return r.n, nil
		}
		if err := r.recheck(ctx); err != nil {
			return r.n, err
		}
		for _, seq := range seqs {
			if err := r.move(ctx, seq); err != nil {
				return r.n, err
			}
		}
	}
}

// recheck reads the consumer again: one made again, or whose floor went back, stops the repair.
func (r *repair) recheck(ctx context.Context) error {
	now, err := r.o.scopeOf(ctx, r.sc.st)
	if err != nil {
		return err
	}
	if now.why != "" || !now.created.Equal(r.sc.created) || now.floor < r.sc.floor {
		return fmt.Errorf("natsjs: consumer %q of stream %q changed during the repair (made again, or its ack floor went back from %d to %d): stopped after %d moved; list the stranded messages again",
			r.o.durable, r.o.stream, r.sc.floor, now.floor, r.n)
	}
	return nil
}

// move reads sequence seq again and moves it: its copy published and stored, then the original
// deleted. A message gone meanwhile is left alone.
func (r *repair) move(ctx context.Context, seq uint64) error {
	o := r.o
	m, err := r.sc.st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsjs: reading stranded sequence %d of stream %q: %w", seq, o.stream, err)
	}
	id := msgID(m, o.stream)
	msg := nats.NewMsg(o.subject)
	msg.Data = m.Data
	for k, vs := range m.Header {
		if len(vs) > 0 && !serverHeader(k) {
			msg.Header.Set(k, vs[0])
		}
	}
	if r.to == RepairToDeadLetter {
		// The dead-letter headers but the count: the server's delivery count is not readable.
		msg.Subject = o.dead
		msg.Header.Del(core.HeaderRetryCount)
		msg.Header.Set(core.HeaderOrigin, o.subject)
		msg.Header.Set(core.HeaderDeadAt, o.clock.Now().UTC().Format(time.RFC3339Nano))
		msg.Header.Set(core.HeaderError, fmt.Sprintf("%s: stream %q held it at sequence %d, at or below consumer %q's ack floor %d, and would not deliver it again (a server crash lost its removal after it was settled, or it reached MaxDeliver)",
			StrandedReason, o.stream, seq, o.durable, r.sc.floor))
		msg.Header.Set(jetstream.MsgIDHeader, id)
	} else {
		msg.Header.Set(jetstream.MsgIDHeader, id+"/stranded/"+o.stream+":"+strconv.FormatUint(seq, 10))
	}
	if _, err := o.c.publishMsg(ctx, r.js, msg); err != nil {
		return fmt.Errorf("natsjs: moving stranded sequence %d of stream %q to %q: %w; it stays in the stream", seq, o.stream, msg.Subject, err)
	}
	if err := r.sc.st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("natsjs: deleting stranded sequence %d of stream %q (its copy is stored on %q): %w", seq, o.stream, msg.Subject, err)
	}
	r.n++
	if r.moved != nil {
		r.moved(seq)
	}
	return nil
}
