package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// ReturnError is the error of a mandatory publishing RabbitMQ returned because no queue is
// bound for it (basic.return, 312 NO_ROUTE): a copy to a dead-letter or waiting queue that does
// not exist, or a Publish under WithConfirm to an exchange without a matching binding. It
// matches ErrUnroutable.
type ReturnError struct {
	// Exchange and Key are where the message was published.
	Exchange, Key string
	// Code and Text are the broker's reply (312 NO_ROUTE).
	Code int
	Text string
}

func (e *ReturnError) Error() string {
	return fmt.Sprintf("%v: exchange %q, routing key %q: %d %s", ErrUnroutable, e.Exchange, e.Key, e.Code, e.Text)
}

// Is makes a ReturnError match ErrUnroutable.
func (e *ReturnError) Is(target error) bool { return target == ErrUnroutable }

// confirmChan is a channel in confirm mode that carries one publishing at a time, so that a
// return seen before a confirmation belongs to that publishing.
type confirmChan struct {
	ch      Channel
	returns chan amqp091.Return
}

// maxIdleConfirmChans bounds the confirm-mode channels a Broker keeps open between
// publishings; more are opened while more publish at once.
const maxIdleConfirmChans = 16

// publishConfirmed publishes msg on a confirm-mode channel of the Broker's own and waits for
// the broker's confirmation. With mandatory, a publishing that reaches no queue fails with a
// *ReturnError (ErrUnroutable); a nack (a full queue under x-overflow reject-publish) or a
// channel that closes first fails with ErrNotConfirmed.
//
// One publishing is outstanding per channel: RabbitMQ sends basic.return before the
// basic.ack of the same publishing, and the client hands the return to the channel's listener
// before it resolves the confirmation, so a return read after the confirmation is this
// publishing's. Concurrent publishings take channels of their own from a small pool.
func (b *Broker) publishConfirmed(ctx context.Context, exchange, key string, mandatory bool, msg amqp091.Publishing) error {
	cc, err := b.confirmChan()
	if err != nil {
		return err
	}
	for len(cc.returns) > 0 {
		<-cc.returns // a return of an earlier publishing whose wait was given up
	}
	dc, err := cc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		_ = cc.ch.Close()
		return gone(err)
	}
	if dc == nil {
		_ = cc.ch.Close()
		return errors.New("amqp: the publishing channel is not in confirm mode")
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		// The confirmation may still come; the channel is not reused, so that it cannot be
		// taken for another publishing's.
		_ = cc.ch.Close()
		return err
	}
	select {
	case r, open := <-cc.returns:
		if open {
			b.releaseConfirmChan(cc)
			return &ReturnError{Exchange: r.Exchange, Key: r.RoutingKey, Code: int(r.ReplyCode), Text: r.ReplyText}
		}
	default:
	}
	if !ok {
		if cc.ch.IsClosed() {
			return fmt.Errorf("%w: the channel closed before the broker confirmed it", ErrNotConfirmed)
		}
		b.releaseConfirmChan(cc)
		return fmt.Errorf("%w: the broker refused it (nack; e.g. a full queue under x-overflow reject-publish)", ErrNotConfirmed)
	}
	b.releaseConfirmChan(cc)
	return nil
}

func (b *Broker) confirmChan() (*confirmChan, error) {
	b.pubMu.Lock()
	for len(b.confirms) > 0 {
		cc := b.confirms[len(b.confirms)-1]
		b.confirms = b.confirms[:len(b.confirms)-1]
		if !cc.ch.IsClosed() {
			b.pubMu.Unlock()
			return cc, nil
		}
	}
	b.pubMu.Unlock()
	ch, err := b.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	return &confirmChan{ch: ch, returns: ch.NotifyReturn(make(chan amqp091.Return, 1))}, nil
}

func (b *Broker) releaseConfirmChan(cc *confirmChan) {
	b.pubMu.Lock()
	defer b.pubMu.Unlock()
	if len(b.confirms) >= maxIdleConfirmChans || cc.ch.IsClosed() {
		_ = cc.ch.Close()
		return
	}
	b.confirms = append(b.confirms, cc)
}

// CopyStats counts what happened to the copies the subscriptions of a Broker published
// (retries on classic queues with a cap, waiting-queue and delayed-exchange copies, dead
// letters). Read it with Broker.CopyStats; the counters only grow, so a metrics exporter
// reports them as counters.
type CopyStats struct {
	// Published copies were confirmed by the broker (under FireAndForget: written).
	Published uint64
	// Refused copies were nacked (a full queue under x-overflow reject-publish): their
	// originals were held back and returned.
	Refused uint64
	// Returned copies reached no queue (basic.return): their originals were held back and
	// returned.
	Returned uint64
	// Failed copies could not be published or confirmed otherwise (the channel or connection
	// closed, the context ended): their originals were held back and returned, or come back
	// with their channel.
	Failed uint64
	// ServerMoved counts originals of refused, returned or failed copies whose return passed
	// their quorum queue's delivery limit: RabbitMQ dead-letters them itself, through the
	// queue's dead-letter route (at-least-once: while the route refuses them, RabbitMQ keeps
	// them in the queue, not ready and out of consumers' sight). Each is also in Refused,
	// Returned or Failed.
	ServerMoved uint64
	// Lost copies were returned unroutable or refused (nack) under FireAndForget, after their
	// originals had been acknowledged: those messages are gone (the documented loss window of
	// FireAndForget).
	Lost uint64
}

type copyCounters struct {
	published, refused, returned, failed, lost, serverMoved atomic.Uint64
}

// CopyStats reports the Broker's copy counters since it was created.
func (b *Broker) CopyStats() CopyStats {
	c := &b.copies
	return CopyStats{Published: c.published.Load(), Refused: c.refused.Load(), Returned: c.returned.Load(),
		Failed: c.failed.Load(), ServerMoved: c.serverMoved.Load(), Lost: c.lost.Load()}
}

func (c *copyCounters) count(err error) {
	switch {
	case errors.Is(err, ErrUnroutable):
		c.returned.Add(1)
	case errors.Is(err, ErrNotConfirmed) && !errors.Is(err, ErrChannelGone):
		c.refused.Add(1)
	default:
		c.failed.Add(1)
	}
}

// holdBack is the wait before a message whose copy failed goes back to its queue: it doubles
// with every round of failures of copies to the same destination (from the Broker's
// CopyRetryBackoff minimum to its maximum) and starts over once a copy there succeeds. A round
// is the wait of its first failure: the failures of many messages within it (one outage seen
// by a whole prefetch window) wait as long as the first, not each twice as long as the one
// before, so a destination that is back after a short outage gets its copies after a short
// wait. The original stays unacknowledged meanwhile and is then rejected with requeue, so a
// refused copy never turns into an immediate redelivery loop; failures are logged at most once
// per logEvery per subscription, with how many there were.
type holdBack struct {
	mu    sync.Mutex
	waits map[string]holdRound // by destination (exchange/routing key)
	logs  rateLog
}

// holdRound is a destination's current wait and when its round ends.
type holdRound struct {
	wait  time.Duration
	until time.Time
}

// logEvery bounds how often a subscription logs refused copies.
const logEvery = 10 * time.Second

// next returns the wait for a failure, seen at now, of a copy to dest: the current round's
// wait while it lasts, the next (doubled) wait after it.
func (h *holdBack) next(dest string, now time.Time, min, max time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waits == nil {
		h.waits = map[string]holdRound{}
	}
	r := h.waits[dest]
	if r.wait == 0 || !now.Before(r.until) {
		r.wait = clock.Backoff(r.wait, min, max)
		r.until = now.Add(r.wait)
		h.waits[dest] = r
	}
	return r.wait
}

// ok forgets the failures of copies to dest.
func (h *holdBack) ok(dest string) {
	h.mu.Lock()
	if h.waits != nil {
		delete(h.waits, dest)
	}
	h.mu.Unlock()
}

// rateLog lets one line through per logEvery and counts the ones it holds back (core.LogPace).
type rateLog struct{ pace core.LogPace }

// allow reports whether a line seen now is logged, and how many were not since the last.
func (r *rateLog) allow(now time.Time) (bool, int) { return r.pace.Allow(now, logEvery) }

// hold keeps d unacknowledged after its copy to dest failed with err, reports the failed
// settlement, and rejects d with requeue once the hold-back wait has passed on the clock.
func (c *consumer) hold(s *session, d core.Delivery, v core.Verdict, settled core.Settled, dest string, err error) {
	c.b.copies.count(err)
	c.report(core.Event{Kind: core.EventCopyRefused, MessageID: d.ID(), Attempt: d.Attempt(), Err: err})
	wait := c.held.next(dest, c.clock.Now(), c.b.copyBackoff[0], c.b.copyBackoff[1])
	// An original whose return the server dead-letters or discards (it reached the quorum
	// queue's delivery limit) is not "returned to the queue": once it is returned, movedByServer
	// says what happened to it instead.
	_, past := c.pastLimit(d)
	if !past {
		if log, quiet := c.held.logs.allow(c.clock.Now()); log {
			c.log.Error("amqp: a copy was not taken by the broker; its original is held back, then returned to the queue",
				"message_id", d.ID(), "attempt", d.Attempt(), "action", v.Action.String(), "to", dest, "error", err,
				"held", wait, "not_logged_since_last", quiet, "stats", slog.AnyValue(c.b.CopyStats()))
		}
	}
	tag := base(d).raw.DeliveryTag
	s.holdFor(c.clock, wait, func() {
		s.acks.reject(tag, true, d, v, func(_ core.Delivery, _ core.Verdict, rerr error) {
			if past && rerr == nil {
				c.movedByServer(d, v, dest, err)
			}
		})
	})
	settled(d, v, err)
}

// holdFor runs release after wait on the clock, unless the session ends first (its channel
// then returns the held message by itself).
func (s *session) holdFor(c clock.Clock, wait time.Duration, release func()) {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	if s.holdsStopped {
		return
	}
	if s.holds == nil {
		s.holds = map[clock.Timer]struct{}{}
	}
	var t clock.Timer
	t = c.AfterFunc(wait, func() {
		s.holdMu.Lock()
		_, live := s.holds[t]
		delete(s.holds, t)
		s.holdMu.Unlock()
		if live {
			release()
		}
	})
	s.holds[t] = struct{}{}
}

// stopHolds cancels the pending releases; the channel's close returns those messages.
func (s *session) stopHolds() {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.holdsStopped = true
	for t := range s.holds {
		t.Stop()
	}
	s.holds = nil
}

// waitConfirm waits for one publisher confirmation; a nack or a closed channel is
// ErrNotConfirmed.
func waitConfirm(ctx context.Context, dc DeferredConfirmation) error {
	if dc == nil {
		return errors.New("amqp: channel is not in confirm mode")
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotConfirmed
	}
	return nil
}
