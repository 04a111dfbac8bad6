package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
)

// Ops is the operations view (ops.Queue) of a JetStream queue (its subject, the stream that
// captures it and its durable consumer) and its dead-letter subject.
//
// Stats reads the consumer's info: Ready is its NumPending (stored, not yet delivered),
// InFlight its NumAckPending (delivered, not yet acknowledged). Stranded counts the messages of
// the subject the stream still holds at or below the consumer's ack floor, which it will never
// deliver again (see ListStranded and RepairStranded): one direct get per stranded message, one
// in all when there is none. A message acknowledged at the instant of the reading can be counted
// once (the server moves the floor just before it removes the message); a stranded one stays. JetStream keeps a message whose
// redelivery is delayed (-NAK with delay) pending acknowledgement too, so delayed messages are
// counted in flight and Delayed is reported unmeasured. OldestReady is the age of the first
// message not yet delivered (a direct get by subject from the consumer's delivered sequence).
// Dead counts the dead-letter subject's messages in the stream that captures it.
//
// Dead letters are read without consuming them (stream message gets by subject), so listing
// costs nothing and changes nothing; a dead letter's id is its sequence in the dead-letter
// stream. Redrive publishes a copy to its origin subject, waits for JetStream's publish
// acknowledgement (stored), and only then deletes the dead letter: interrupted, nothing is
// lost. The copy's Nats-Msg-Id names the dead letter ("<message id>/redrive/<stream>:<seq>"), so
// a redrive repeated after an interruption within the origin stream's duplicate window is
// dropped as a duplicate instead of stored twice. JetStream counts deliveries per message
// (NumDelivered) and a copy is a new message: a redriven message always starts again at
// attempt 1, and RedriveOptions.KeepAttempts is refused.
type Ops struct {
	c        *Conn
	subject  string
	dead     string
	stream   string // the queue's stream
	durable  string
	dlStream string // the stream capturing dead ("" without a dead letter)
	clock    clock.Clock
}

var _ ops.Queue = (*Ops)(nil)

// OpsOption configures an Ops.
type OpsOption func(*Ops) error

// OpsDurable names the queue's durable consumer when it is not named after its stream (the
// queue's Durable option).
func OpsDurable(name string) OpsOption {
	return func(o *Ops) error {
		if err := validName("natsjs.OpsDurable", name); err != nil {
			return err
		}
		o.durable = name
		return nil
	}
}

// OpsClock takes the time of Stats from c (default: the wall clock).
func OpsClock(c clock.Clock) OpsOption {
	return func(o *Ops) error {
		if c == nil {
			return errors.New("natsjs.OpsClock(nil): no clock")
		}
		o.clock = c
		return nil
	}
}

// ErrKeepAttempts is the error of a Redrive asked to keep attempt counts: JetStream counts the
// deliveries of each message, and a redriven copy is a new message.
var ErrKeepAttempts = errors.New("natsjs: JetStream counts deliveries per message (NumDelivered), so a redriven copy starts at attempt 1; attempts cannot be kept")

// NewOps returns the operations view of the queue on subject, whose dead letters go to the
// subject dead ("" for none), on c. The streams are those that capture the subjects; the
// durable consumer is named after the queue's stream unless OpsDurable. A subject no stream
// captures gives an error matching ops.ErrTargetNotFound.
func NewOps(ctx context.Context, c *Conn, subject, dead string, opts ...OpsOption) (*Ops, error) {
	if c == nil {
		return nil, errors.New("natsjs.NewOps: nil Conn")
	}
	if err := validSubject("natsjs.NewOps: subject", subject); err != nil {
		return nil, err
	}
	if dead != "" {
		if err := validSubject("natsjs.NewOps: dead-letter subject", dead); err != nil {
			return nil, err
		}
	}
	o := &Ops{c: c, subject: subject, dead: dead, clock: clock.Real()}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("natsjs.NewOps: nil option")
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	js, err := c.JetStream()
	if err != nil {
		return nil, fmt.Errorf("natsjs: connecting: %w", err)
	}
	if o.stream, err = streamOf(ctx, js, subject); err != nil {
		return nil, err
	}
	if o.durable == "" {
		o.durable = o.stream
	}
	if dead != "" {
		if o.dlStream, err = streamOf(ctx, js, dead); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func streamOf(ctx context.Context, js jetstream.JetStream, subject string) (string, error) {
	name, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", &ops.TargetError{What: fmt.Sprintf("subject %q", subject), Why: "no stream captures it"}
	}
	if err != nil {
		return "", fmt.Errorf("natsjs: finding the stream of subject %q: %w", subject, err)
	}
	return name, nil
}

func (o *Ops) js() (jetstream.JetStream, error) {
	js, err := o.c.JetStream()
	if err != nil {
		return nil, fmt.Errorf("natsjs: connecting: %w", err)
	}
	return js, nil
}

// Stats reads the consumer's and the dead-letter stream's counts.
func (o *Ops) Stats(ctx context.Context) (ops.Stats, error) {
	now := o.clock.Now().UTC()
	s := ops.Stats{Queue: o.subject, DeadLetter: o.dead, At: now, Unmeasured: []ops.Unmeasured{{Figure: ops.FigureDelayed,
		Why: "JetStream keeps a message whose redelivery is delayed (-NAK with delay) pending acknowledgement: it is counted in flight"}}}
	js, err := o.js()
	if err != nil {
		return s, err
	}
	st, err := js.Stream(ctx, o.stream)
	if err != nil {
		return s, fmt.Errorf("natsjs: stream %q: %w", o.stream, err)
	}
	cons, err := st.Consumer(ctx, o.durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// No service has consumed yet: every message of the subject is ready.
		n, err := subjectCount(ctx, st, o.subject)
		if err != nil {
			return s, err
		}
		s.Ready = n
		s.Unmeasured = append(s.Unmeasured, ops.Unmeasured{Figure: ops.FigureInFlight, Why: fmt.Sprintf("no consumer %q on stream %q yet", o.durable, o.stream)})
		if err := o.oldest(ctx, st, 1, n, &s); err != nil {
			return s, err
		}
	case err != nil:
		return s, fmt.Errorf("natsjs: consumer %q of stream %q: %w", o.durable, o.stream, err)
	default:
		ci, err := cons.Info(ctx)
		if err != nil {
			return s, fmt.Errorf("natsjs: consumer %q of stream %q: %w", o.durable, o.stream, err)
		}
		s.Ready, s.InFlight = int64(ci.NumPending), int64(ci.NumAckPending)
		if err := o.oldest(ctx, st, ci.Delivered.Stream+1, s.Ready, &s); err != nil {
			return s, err
		}
		if st.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy { // others keep messages by design
			if s.Stranded, err = o.countStranded(ctx, strandedScope{st: st, floor: ci.AckFloor.Stream}); err != nil {
				return s, err
			}
		}
	}
	if o.dead == "" {
		s.Unmeasured = append(s.Unmeasured, ops.Unmeasured{Figure: ops.FigureDead, Why: "no dead-letter subject named"})
		return s, nil
	}
	dl, err := js.Stream(ctx, o.dlStream)
	if err != nil {
		return s, fmt.Errorf("natsjs: dead-letter stream %q: %w", o.dlStream, err)
	}
	s.Dead, err = subjectCount(ctx, dl, o.dead)
	return s, err
}

// oldest sets the age of the first ready message, from sequence from on.
func (o *Ops) oldest(ctx context.Context, st jetstream.Stream, from uint64, ready int64, s *ops.Stats) error {
	if ready == 0 {
		return nil
	}
	m, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(o.subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsjs: reading the oldest ready message of %q: %w", o.subject, err)
	}
	s.OldestReady = max(s.At.Sub(m.Time), 0)
	return nil
}

func subjectCount(ctx context.Context, st jetstream.Stream, subject string) (int64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("natsjs: counting subject %q: %w", subject, err)
	}
	return int64(info.State.Subjects[subject]), nil
}

// deadLetter describes a message of the dead-letter stream.
func deadLetter(m *jetstream.RawStreamMsg) ops.DeadLetter {
	d := ops.DeadLetter{ID: strconv.FormatUint(m.Sequence, 10), Payload: m.Data, Headers: make(map[string]string, len(m.Header))}
	for k, vs := range m.Header {
		if len(vs) > 0 {
			d.Headers[k] = vs[0]
		}
	}
	_ = d.ReadHeaders() // a malformed header leaves its field unset
	return d
}

// next reads the first dead letter at or after sequence seq; ok is false past the last.
func (o *Ops) next(ctx context.Context, dl jetstream.Stream, seq uint64) (m *jetstream.RawStreamMsg, ok bool, err error) {
	m, err = dl.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(o.dead))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("natsjs: reading dead-letter stream %q: %w", o.dlStream, err)
	}
	return m, true, nil
}

func (o *Ops) deadStream(ctx context.Context) (jetstream.Stream, error) {
	if o.dead == "" {
		return nil, fmt.Errorf("%w: queue %q", ops.ErrNoDeadLetter, o.subject)
	}
	js, err := o.js()
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, o.dlStream)
	if err != nil {
		return nil, fmt.Errorf("natsjs: dead-letter stream %q: %w", o.dlStream, err)
	}
	return st, nil
}

// ListDead reads the dead letters in sequence order from the cursor (a sequence) on.
func (o *Ops) ListDead(ctx context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	seq := uint64(1)
	if p.After != "" {
		n, err := strconv.ParseUint(p.After, 10, 64)
		if err != nil {
			return ops.DeadPage{}, fmt.Errorf("natsjs: listing cursor %q is not a sequence", p.After)
		}
		seq = n + 1
	}
	dl, err := o.deadStream(ctx)
	if err != nil {
		return ops.DeadPage{}, err
	}
	var page ops.DeadPage
	for {
		m, ok, err := o.next(ctx, dl, seq)
		if err != nil || !ok {
			return page, err
		}
		seq = m.Sequence + 1
		d := deadLetter(m)
		if !f.Match(d) {
			continue
		}
		if len(page.Items) == p.LimitOf() {
			page.Next = page.Items[len(page.Items)-1].ID
			return page, nil
		}
		page.Items = append(page.Items, d)
	}
}

// GetDead reads the dead letter at sequence id.
func (o *Ops) GetDead(ctx context.Context, id string) (ops.DeadLetter, error) {
	dl, err := o.deadStream(ctx)
	if err != nil {
		return ops.DeadLetter{}, err
	}
	m, err := o.get(ctx, dl, id)
	if err != nil {
		return ops.DeadLetter{}, err
	}
	return deadLetter(m), nil
}

func (o *Ops) notFound(ids ...string) error {
	return &ops.NotFoundError{DeadLetter: fmt.Sprintf("subject %q (stream %q)", o.dead, o.dlStream), IDs: ids}
}

func (o *Ops) get(ctx context.Context, dl jetstream.Stream, id string) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(id, 10, 64)
	if err != nil || seq == 0 {
		return nil, o.notFound(id)
	}
	m, err := dl.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Subject != o.dead) {
		return nil, o.notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("natsjs: reading dead letter %s: %w", id, err)
	}
	return m, nil
}

// selected calls fn with each selected dead letter in sequence order; a selection of ids is
// read whole first, and refused with *ops.NotFoundError when one is missing.
func (o *Ops) selected(ctx context.Context, dl jetstream.Stream, s ops.Selection, fn func(m *jetstream.RawStreamMsg, d ops.DeadLetter) error) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(s.IDs) > 0 {
		var ms []*jetstream.RawStreamMsg
		var missing []string
		for _, id := range s.IDs {
			m, err := o.get(ctx, dl, id)
			if errors.Is(err, ops.ErrNotFound) {
				missing = append(missing, id)
				continue
			}
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
		if len(missing) > 0 {
			return o.notFound(missing...)
		}
		for _, m := range ms {
			if err := fn(m, deadLetter(m)); err != nil {
				return err
			}
		}
		return nil
	}
	for seq := uint64(1); ; {
		m, ok, err := o.next(ctx, dl, seq)
		if err != nil || !ok {
			return err
		}
		seq = m.Sequence + 1
		if d := deadLetter(m); s.Match(d) {
			if err := fn(m, d); err != nil {
				return err
			}
		}
	}
}

// Redrive publishes each selected dead letter to its origin subject and deletes it once the
// copy is stored (see Ops).
func (o *Ops) Redrive(ctx context.Context, s ops.Selection, opt ops.RedriveOptions) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if opt.KeepAttempts {
		return 0, ErrKeepAttempts
	}
	dl, err := o.deadStream(ctx)
	if err != nil {
		return 0, err
	}
	js, err := o.js()
	if err != nil {
		return 0, err
	}
	moved := 0
	err = o.selected(ctx, dl, s, func(m *jetstream.RawStreamMsg, d ops.DeadLetter) error {
		to := d.Origin
		if to == "" || to == o.dead {
			to = o.subject
		}
		msg := nats.NewMsg(to)
		msg.Data = m.Data
		for k, v := range ops.RedriveHeaders(d.Headers, false) {
			if !serverHeader(k) {
				msg.Header.Set(k, v)
			}
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if id == "" {
			id = d.ID
		}
		msg.Header.Set(jetstream.MsgIDHeader, id+"/redrive/"+o.dlStream+":"+d.ID)
		if _, err := o.c.publishMsg(ctx, js, msg); err != nil {
			return fmt.Errorf("natsjs: redriving dead letter %s to %q: %w; it stays in %q", d.ID, to, err, o.dead)
		}
		if err := dl.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("natsjs: deleting redriven dead letter %s (its copy is stored on %q): %w", d.ID, to, err)
		}
		moved++
		if opt.Moved != nil {
			opt.Moved([]string{d.ID})
		}
		return nil
	})
	return moved, err
}

// Purge deletes the selected dead letters: all of them with one purge of the subject (the count
// is the subject's just before), otherwise one by one.
func (o *Ops) Purge(ctx context.Context, s ops.Selection) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	dl, err := o.deadStream(ctx)
	if err != nil {
		return 0, err
	}
	if s.All {
		before, err := subjectCount(ctx, dl, o.dead)
		if err != nil {
			return 0, err
		}
		if err := dl.Purge(ctx, jetstream.WithPurgeSubject(o.dead)); err != nil {
			return 0, fmt.Errorf("natsjs: purging %q: %w", o.dead, err)
		}
		return int(before), nil
	}
	deleted := 0
	err = o.selected(ctx, dl, s, func(m *jetstream.RawStreamMsg, d ops.DeadLetter) error {
		if err := dl.DeleteMsg(ctx, m.Sequence); err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil
			}
			return fmt.Errorf("natsjs: deleting dead letter %s: %w", d.ID, err)
		}
		deleted++
		return nil
	})
	return deleted, err
}
