package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// Publisher publishes messages of type T to one Target, the same way on every backend:
//
//	pub, err := core.NewPublisher[Refund](postgres.Queue(db, "refunds_queue", "refunds"))
//	r, err := pub.Publish(ctx, Refund{ID: "r-1"}, core.MessageID("r-1"), core.OrderingKey("cust-7"))
//
// Publishing is confirmed: Publish returns once the message is durable on the backend (the SQL
// commit, the RabbitMQ publisher confirm, the JetStream PubAck), and a message the backend
// cannot route or refuses is an error. A Publisher is safe for concurrent use and needs no
// closing: it opens the target's Sender at its first publish, and the backend owns it.
//
// In a handler, Reply publishes as part of the delivery's acknowledgement instead (see Replies).
type Publisher[T any] struct {
	p *publisher
}

// publisher is the part of a Publisher that does not depend on T: what a subscription that
// declares it (Replies) works with.
type publisher struct {
	target  Target
	codec   Codec
	prop    Propagator   // PublishPropagator; nil: the one the context carries
	payload reflect.Type // T, for Replier.PayloadType
	sender  atomic.Pointer[Sender]
	opening chan struct{} // a one-slot lock around Target.Sender that a waiting context can leave
}

// PublisherOption configures a Publisher: PublishCodec, PublishPropagator.
type PublisherOption interface {
	applyPublisher(*publisher) error
}

type publisherOptionFunc func(*publisher) error

func (f publisherOptionFunc) applyPublisher(p *publisher) error { return f(p) }

// PublishCodec encodes the publisher's payloads with c (default JSON); its content type goes
// with every message.
func PublishCodec(c Codec) PublisherOption {
	return publisherOptionFunc(func(p *publisher) error {
		if c == nil {
			return errors.New("core.PublishCodec(nil): no codec")
		}
		p.codec = c
		return nil
	})
}

// PublishPropagator injects the publishing context's trace context into every message's headers
// with pp (default: the Propagator the context carries, see WithPropagator and
// ContextWithPropagator).
func PublishPropagator(pp Propagator) PublisherOption {
	return publisherOptionFunc(func(p *publisher) error {
		if pp == nil {
			return errors.New("core.PublishPropagator(nil): no propagator")
		}
		p.prop = pp
		return nil
	})
}

// NewPublisher returns a Publisher of T to target. It only validates its arguments: the target's
// Sender is opened at the first publish, so a Publisher can be made before its backend is
// reachable (or started by an App).
func NewPublisher[T any](target Target, opts ...PublisherOption) (*Publisher[T], error) {
	if target == nil {
		return nil, errors.New("core.NewPublisher: nil target")
	}
	p := &publisher{target: target, codec: JSON, payload: reflect.TypeFor[T](), opening: make(chan struct{}, 1)}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("core.NewPublisher to %q: option %d is nil", target.Queue(), i)
		}
		if err := o.applyPublisher(p); err != nil {
			return nil, fmt.Errorf("core.NewPublisher to %q: %w", target.Queue(), err)
		}
	}
	return &Publisher[T]{p: p}, nil
}

// Target returns the publisher's target.
func (p *Publisher[T]) Target() Target { return p.p.target }

// PayloadType returns T (for a description of the service: what a subscription's replies carry).
func (p *Publisher[T]) PayloadType() reflect.Type { return p.p.payload }

func (p *Publisher[T]) replyPublisher() *publisher {
	if p == nil {
		return nil
	}
	return p.p
}

// Publish encodes v and publishes it with opts, confirmed. The receipt carries the message id
// the backend was given (MessageID) or assigned, and Duplicate when a message with the same
// DedupKey is still pending; its Err is the error returned. An invalid option, an option the
// backend cannot honour (*UnsupportedError) and a message the backend refuses are errors.
func (p *Publisher[T]) Publish(ctx context.Context, v T, opts ...PublishOption) (Receipt, error) {
	m, err := p.p.outgoing(ctx, v, opts)
	if err != nil {
		return Receipt{Err: err}, err
	}
	s, err := p.p.open(ctx)
	if err != nil {
		return Receipt{Err: err}, err
	}
	msgs := [1]Outgoing{m}
	resolveNotBefore(&msgs[0], s.Clock())
	rs := s.Send(ctx, msgs[:])
	if len(rs) != 1 {
		err := p.p.miscounted(len(rs), 1)
		return Receipt{Err: err}, err
	}
	return rs[0], rs[0].Err
}

// Draft is one message of a PublishBatch: a payload and its options.
type Draft[T any] struct {
	Payload T
	Options []PublishOption
}

// PublishBatch publishes the drafts in order, as one round trip where the backend can (a
// multi-row INSERT, pipelined confirms, asynchronous JetStream publishes), and returns one
// Receipt per draft, in order, each with its own Err: a draft whose options are invalid or whose
// payload does not encode is refused alone, the others are still published. The error is
// non-nil only when no draft could be tried (the context is done, the target's Sender could not
// be opened, every draft was refused); every receipt then carries an error too.
func (p *Publisher[T]) PublishBatch(ctx context.Context, drafts []Draft[T]) ([]Receipt, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	rs := make([]Receipt, len(drafts))
	failAll := func(err error) ([]Receipt, error) {
		for i := range rs {
			if rs[i].Err == nil {
				rs[i].Err = err
			}
		}
		return rs, err
	}
	if err := ctx.Err(); err != nil {
		return failAll(fmt.Errorf("settle: publish to %q: %w", p.p.target.Queue(), err))
	}
	msgs := make([]Outgoing, 0, len(drafts))
	at := make([]int, 0, len(drafts)) // the draft of each message
	for i, d := range drafts {
		m, err := p.p.outgoing(ctx, d.Payload, d.Options)
		if err != nil {
			rs[i].Err = fmt.Errorf("draft %d: %w", i, err)
			continue
		}
		msgs, at = append(msgs, m), append(at, i)
	}
	if len(msgs) == 0 {
		return rs, fmt.Errorf("settle: publish to %q: every one of the %d drafts was refused; the first: %w",
			p.p.target.Queue(), len(drafts), rs[0].Err)
	}
	s, err := p.p.open(ctx)
	if err != nil {
		return failAll(err)
	}
	c := s.Clock()
	for i := range msgs {
		resolveNotBefore(&msgs[i], c)
	}
	sent := s.Send(ctx, msgs)
	if len(sent) != len(msgs) {
		return failAll(p.p.miscounted(len(sent), len(msgs)))
	}
	for j, r := range sent {
		rs[at[j]] = r
	}
	return rs, nil
}

// outgoing encodes v and applies opts: the message as a Sender takes it, but for NotBefore,
// which needs the Sender's clock.
func (p *publisher) outgoing(ctx context.Context, v any, opts []PublishOption) (Outgoing, error) {
	o := &PublishOptions{}
	if err := o.Apply(opts...); err != nil {
		return Outgoing{}, fmt.Errorf("settle: publish to %q: %w", p.target.Queue(), err)
	}
	body, err := p.codec.Marshal(v)
	if err != nil {
		return Outgoing{}, fmt.Errorf("settle: publish to %q: encode %T: %w", p.target.Queue(), v, err)
	}
	return Outgoing{
		ID:            o.id,
		Body:          body,
		ContentType:   p.codec.ContentType(),
		Headers:       InjectHeaders(ctx, p.prop, o.headers),
		CorrelationID: o.correlationID,
		OrderingKey:   o.orderingKey,
		DedupKey:      o.dedupKey,
		Priority:      o.priority,
		Options:       o,
	}, nil
}

// resolveNotBefore sets m.NotBefore from its Delay or NotBefore option on c; a time not after
// c's now is zero (deliver at once).
func resolveNotBefore(m *Outgoing, c clock.Clock) {
	o := m.Options
	if o.set&(setDelay|setNotBefore) == 0 {
		return
	}
	now := c.Now()
	at := o.notBefore
	if o.set&setDelay != 0 {
		at = now.Add(o.delay)
	}
	if !at.After(now) {
		at = time.Time{}
	}
	m.NotBefore = at
}

// open returns the target's Sender, opening it at the first call (one caller at a time; the
// others wait, or leave with their context). A failure is returned and the next call tries again.
func (p *publisher) open(ctx context.Context) (Sender, error) {
	if s := p.sender.Load(); s != nil {
		return *s, nil
	}
	select {
	case p.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("settle: publish to %q: %w", p.target.Queue(), ctx.Err())
	}
	defer func() { <-p.opening }()
	if s := p.sender.Load(); s != nil {
		return *s, nil
	}
	s, err := p.target.Sender(ctx)
	if err == nil && s == nil {
		err = errors.New("the target returned no sender")
	}
	if err == nil && s.Clock() == nil {
		err = errors.New("the target's sender has no clock")
	}
	if err != nil {
		return nil, fmt.Errorf("settle: publish to %q: opening its sender: %w", p.target.Queue(), err)
	}
	p.sender.Store(&s)
	return s, nil
}

func (p *publisher) miscounted(got, want int) error {
	return errors.New("settle: publish to " + strconv.Quote(p.target.Queue()) + ": the backend's Sender returned " +
		strconv.Itoa(got) + " receipts for " + strconv.Itoa(want) + " messages (a bug in the backend); the messages may or may not be published")
}
