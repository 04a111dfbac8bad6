package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"sync"
)

// Replier is a publisher a handler replies through: a *Publisher[T], declared on the
// subscription with Replies. Only core's Publisher implements it; a backend or a description of
// the service reads a subscription's declared replies from Options.Replies.
type Replier interface {
	// Target is where the replies go.
	Target() Target
	// PayloadType is the replies' payload type, T.
	PayloadType() reflect.Type

	replyPublisher() *publisher
}

// Replies declares the publishers the subscription's handler replies through: the messages it
// produces as part of its outcome (a refund handler that emits a payout). The handler calls
// (*Publisher[T]).Reply with its context; the replies are published only when the delivery is
// acknowledged, tied to the settlement:
//
//   - where the backend's Finisher publishes to the reply's target atomically with its ack (a
//     ReplySettler: a SQL queue in the same database), in the settlement's transaction: nothing
//     is published if it rolls back, nothing is lost if it commits;
//   - everywhere else, confirmed, before the ack: a crash between the two publishes the replies
//     again when the message is redelivered (with the same ids, see ReplyID), never loses them.
//
// A retry, drop, dead letter or abandon publishes nothing (the replies are discarded, logged at
// debug level). A reply that cannot be published leaves the message unacknowledged: the failure
// (a *ReplyError) takes the subscription's error policy, and none of the replies is kept.
func Replies(pubs ...Replier) Option {
	return OptionFunc(func(o *Options) error {
		for i, r := range pubs {
			if r == nil || r.replyPublisher() == nil {
				return fmt.Errorf("core.Replies: publisher %d is nil", i)
			}
			for _, seen := range o.Replies {
				if seen.replyPublisher() == r.replyPublisher() {
					return fmt.Errorf("core.Replies: the publisher to %q is given twice", r.Target().Queue())
				}
			}
			o.Replies = append(o.Replies, r)
		}
		return nil
	})
}

// Reply is a message a handler produced with (*Publisher[T]).Reply, published as part of its
// delivery's acknowledgement: to Target, as Message.
type Reply struct {
	// Target is where the reply is published: its Publisher's target.
	Target Target
	// Message is the reply, encoded, with its options resolved (its ID is always set: the
	// MessageID given, or the stable id ReplyID derives).
	Message Outgoing
}

// ReplySettler is implemented by a Finisher that can publish replies atomically with an
// acknowledgement: a SQL finisher whose INSERTs into a queue table of the same database run in
// the settlement's transaction, so nothing is published if the settlement rolls back and nothing
// is lost if it commits. Core asks once, when the subscription opens, for each target its
// handler declared (Replies); the replies to the targets it settles arrive in the ack's
// Verdict.Replies, and the Finisher publishes them with the ack. Core publishes the replies to
// every other target itself, confirmed, before it calls Finish with the ack.
//
// The Finisher honours a reply's options as the target's Sender would (its own ones read with
// Ext, Unread's error for the rest); a reply it cannot write fails the settlement, and the
// message returns as an abandoned one would, its replies unpublished.
type ReplySettler interface {
	// SettlesReplies reports whether the Finisher publishes replies to t with its
	// acknowledgements.
	SettlesReplies(t Target) bool
}

// ReplyError is the cause of the verdict of a message whose replies could not be published.
type ReplyError struct {
	// Queue names the reply's target; ID is the reply's message id.
	Queue, ID string
	// Err is the publish error.
	Err error
}

func (e *ReplyError) Error() string {
	return "publish reply " + strconv.Quote(e.ID) + " to " + strconv.Quote(e.Queue) + ": " + e.Err.Error()
}

func (e *ReplyError) Unwrap() error { return e.Err }

// ReplyID is the message id of the n-th reply (from 0) a handler of sub produces for delivery d
// when the reply is given no MessageID: the first 32 hex digits of the SHA-256 of the
// subscription's queue, its name, the delivery's id and n in decimal, each followed by a zero byte. A redelivered message has the same id, so its replies get
// the same ids again and a consumer's inbox or a DedupKey-free dedup by id drops the duplicates.
// (Renaming a subscription changes the ids of its replies.)
func ReplyID(sub Subscription, d Delivery, n int) string {
	var buf [160]byte // on the stack for the usual lengths
	b := append(buf[:0], sub.Queue...)
	b = append(append(b, 0), sub.Name...)
	b = append(append(b, 0), d.ID()...)
	b = strconv.AppendInt(append(b, 0), int64(n), 10)
	sum := sha256.Sum256(append(b, 0))
	return hex.EncodeToString(sum[:16])
}

// Reply adds v to the replies of the delivery whose handler ctx belongs to; it is published,
// with opts, when that delivery is acknowledged (see Replies). An invalid option or a payload
// that does not encode is returned at once. Reply fails, naming both, when the subscription did
// not declare this publisher with Replies, when ctx is not a handler's context, and after the
// handler has returned.
func (p *Publisher[T]) Reply(ctx context.Context, v T, opts ...PublishOption) error {
	rb, _ := ctx.Value(replyKey{}).(*replyBuffer)
	if rb == nil {
		return fmt.Errorf("settle: Reply to %q outside a handler: only the handler of a subscription that declares core.Replies with this publisher replies (use Publish elsewhere)",
			p.p.target.Queue())
	}
	route := rb.s.route(p.p)
	if route < 0 {
		return fmt.Errorf("settle: Reply to %q from subscription %q, which does not declare it: add core.Replies with this publisher to its Subscribe",
			p.p.target.Queue(), rb.s.name)
	}
	m, err := p.p.outgoing(ctx, v, opts)
	if err != nil {
		return err
	}
	return rb.add(route, m)
}

type replyKey struct{}

// replyBuffer holds the replies of one delivery until it is settled.
type replyBuffer struct {
	s *subscription
	d Delivery

	mu     sync.Mutex
	closed bool
	list   []pendingReply
}

type pendingReply struct {
	route int // index into subscription.replies
	msg   Outgoing
}

func (b *replyBuffer) add(route int, m Outgoing) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("settle: Reply to %q after the handler of subscription %q returned (message %s)",
			b.s.replies[route].p.target.Queue(), b.s.name, b.d.ID())
	}
	if m.ID == "" {
		m.ID = ReplyID(b.s.info, b.d, len(b.list))
	}
	b.list = append(b.list, pendingReply{route: route, msg: m})
	return nil
}

// close ends the handler's replies and returns them.
func (b *replyBuffer) close() []pendingReply {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.list
}

// replyRoute is a publisher a subscription declared with Replies, and who publishes its replies.
type replyRoute struct {
	p       *publisher
	settled bool // by the subscription's Finisher, with the ack (ReplySettler)
}

// openReplies asks the subscription's finisher which reply targets it settles itself.
func (s *subscription) openReplies() {
	s.replies = make([]replyRoute, len(s.opts.Replies))
	rs, _ := s.fin.(ReplySettler)
	for i, r := range s.opts.Replies {
		p := r.replyPublisher()
		s.replies[i] = replyRoute{p: p, settled: rs != nil && rs.SettlesReplies(p.target)}
	}
}

// route returns the index of p among the subscription's declared replies, -1 if it is not one.
func (s *subscription) route(p *publisher) int {
	for i := range s.replies {
		if s.replies[i].p == p {
			return i
		}
	}
	return -1
}

// withReplies ties the replies of d's handler to its verdict v: on an ack, the ones core
// publishes are published (confirmed) and the ones the Finisher settles are put in the verdict;
// any other verdict discards them. A reply that cannot be published turns the ack into the error
// policy's verdict (an abandon when the App is stopping).
func (s *subscription) withReplies(ctx context.Context, d Delivery, rb *replyBuffer, v Verdict) Verdict {
	list := rb.close()
	if len(list) == 0 {
		return v
	}
	if v.Action != ActAck {
		s.info.Logger.Debug("settle: replies discarded: the message was not acknowledged",
			"message_id", d.ID(), "attempt", d.Attempt(), "verdict", v.String(), "replies", len(list))
		return v
	}
	if err := s.publishReplies(ctx, list); err != nil {
		if ctx.Err() != nil {
			s.info.Logger.Warn("settle: publishing the replies stopped by shutdown; delivery abandoned, it comes back",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
			return Verdict{Action: ActAbandon, Cause: err}
		}
		r := s.resolve(d, s.policy(s.opts.OnError, d, err))
		s.info.Logger.Warn("settle: publishing a reply failed; the message is not acknowledged and its replies are discarded",
			"message_id", d.ID(), "attempt", d.Attempt(), "error", err, "policy", r.String())
		return r
	}
	for _, r := range list {
		if route := s.replies[r.route]; route.settled {
			resolveNotBefore(&r.msg, s.app.clock)
			v.Replies = append(v.Replies, Reply{Target: route.p.target, Message: r.msg})
		}
	}
	return v
}

// publishReplies publishes the replies core publishes itself, one batch per target, in order,
// and returns the first failure.
func (s *subscription) publishReplies(ctx context.Context, list []pendingReply) error {
	var batch []Outgoing
	for i, route := range s.replies {
		if route.settled {
			continue
		}
		batch = batch[:0]
		for _, r := range list {
			if r.route == i {
				batch = append(batch, r.msg)
			}
		}
		if len(batch) == 0 {
			continue
		}
		snd, err := route.p.open(ctx)
		if err != nil {
			return &ReplyError{Queue: route.p.target.Queue(), ID: batch[0].ID, Err: err}
		}
		c := snd.Clock()
		for j := range batch {
			resolveNotBefore(&batch[j], c)
		}
		rs := snd.Send(ctx, batch)
		if len(rs) != len(batch) {
			return &ReplyError{Queue: route.p.target.Queue(), ID: batch[0].ID, Err: route.p.miscounted(len(rs), len(batch))}
		}
		for j, r := range rs {
			if r.Err != nil {
				return &ReplyError{Queue: route.p.target.Queue(), ID: batch[j].ID, Err: r.Err}
			}
		}
	}
	return nil
}
