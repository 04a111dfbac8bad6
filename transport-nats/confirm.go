package natsjs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/settlehq/settle/core"
)

// Confirmed settlements (acks and +TERMs without UnconfirmedAcks).
//
// A confirmed frame is published on the delivery's ack subject with a reply subject of the
// subscription's own inbox, "<inbox>.<token>", one token per settlement; the subscription
// listens on "<inbox>.*" with one NATS subscription, and the server's answer, matched by its
// token, reports the settlement. The waiting ones are in a map by token and, in the order they
// were sent (which is the order of their deadlines: all wait confirmWait), on a list that one
// timer sweeps: one past its deadline fails. A settlement waiting costs its confirmation and an
// entry in the map, no goroutine, context, channel or timer of its own (each used to run two
// goroutines, a context with its timer and a channel: most of a confirmed ack's cost on the
// client).
//
// A confirmation fails when every send of it was refused: its publish failed, or the server
// answered "no responders" (no consumer listens on the ack subject any more). The frame was not
// applied, and the settlement is reported as failed. It ends unknown (ErrSettlementUnknown: the
// frame was sent, the server may have applied it) when:
//
//   - the deadline passes without an answer (the answer was lost, or a server that forgot the
//     delivery in a crash ignored the frame);
//   - the connection drops (an answer still due will never come: the request never reached the
//     server, or it answered on the connection that died);
//   - the context Finish was given ends (core cancels its work context when the shutdown
//     timeout runs out).
//
// Everything here is guarded by the consumer's flyMu, with the messages in hand (inflight.go).

// confirmation is a settlement frame (+ACK, +TERM) sent with a reply subject of the consumer's
// inbox, perhaps on several deliveries of its sequence (inflight.go); the first answer confirms
// it. (Not part of the Delivery: with UnconfirmedAcks its bytes would be allocated for nothing
// with every message.)
type confirmation struct {
	token    uint64
	reply    string // the inbox subject its answers come to
	body     []byte
	what     string
	d        *Delivery
	v        core.Verdict
	settled  core.Settled
	ctx      context.Context
	deadline time.Time
	sent     int   // sends without an answer yet
	first    error // the first refused send
	waiting  bool  // in the map and on the list

	prev, next *confirmation // the list, in the order of deadlines
}

// confirmer is a consumer's waiting confirmations (guarded by flyMu).
type confirmer struct {
	inbox      string // "<inbox>.": a token follows
	sub        *nats.Subscription
	token      uint64
	pending    map[uint64]*confirmation
	head, tail *confirmation
	timer      *time.Timer
	armed      bool
	at         time.Time                  // when the timer fires (armed): at or before the first deadline
	watched    map[<-chan struct{}]*watch // the contexts whose end fails their confirmations
	closed     bool                       // Close: unsubscribe once nothing waits
}

// watch is a context watched for the confirmations waiting under it: the watch ends when the
// last of them is done, so a caller passing a context of its own to every Finish leaves none
// behind.
type watch struct {
	stop func() bool // the context.AfterFunc's
	n    int         // confirmations waiting under it
}

// listen subscribes to the consumer's reply inbox.
func (c *consumer) listen() error {
	c.cf.inbox = c.nc.NewInbox() + "."
	c.cf.pending = make(map[uint64]*confirmation)
	sub, err := c.nc.Subscribe(c.cf.inbox+"*", c.answered)
	if err != nil {
		return fmt.Errorf("subscribe to the confirmations' inbox: %w", err)
	}
	// The answers waiting are bounded by the settlements waiting (the consumer's MaxAckPending):
	// none is dropped as a slow consumer's.
	_ = sub.SetPendingLimits(-1, -1)
	c.cf.sub = sub
	return nil
}

// confirmed settles d with frame (+ACK, +TERM) published with a reply subject of the consumer's
// inbox, and reports the settlement once the server answered it, or failed: Finish returns at
// once and the worker goes on, so an answer that does not come (a server that forgot the
// delivery in a crash ignores it) holds no worker, and the fetches go on — which is also what
// brings the server's new delivery of the message, whose answer confirms it (inHand).
func (c *consumer) confirmed(ctx context.Context, d *Delivery, v core.Verdict, settled core.Settled, what string, frame []byte) {
	cf := new(confirmation)
	c.flyMu.Lock()
	if err := ctx.Err(); err != nil {
		c.flyMu.Unlock()
		c.written(d, v, settled, err, frame)
		return
	}
	c.cf.token++
	*cf = confirmation{token: c.cf.token, body: frame, what: what, d: d, v: v, settled: settled, ctx: ctx,
		deadline: time.Now().Add(c.confirmWait()), sent: 1}
	cf.reply = c.cf.inbox + strconv.FormatUint(cf.token, 10)
	m := d.msg
	if f, ok := c.flights[d.seq]; ok && f.d == d {
		f.conf, m = cf, f.latest
	}
	c.waitLocked(cf)
	c.flyMu.Unlock()
	if err := c.nc.PublishRequest(m.Reply(), cf.reply, frame); err != nil {
		c.refused(cf, err)
	}
}

// waitLocked puts cf in the map and on the list (at its end, but for a RequestTimeout changed
// meanwhile), arms the timer when it fires later than cf's deadline or not at all, and watches
// cf's context.
func (c *consumer) waitLocked(cf *confirmation) {
	w := &c.cf
	w.pending[cf.token] = cf
	cf.waiting = true
	// After the last one sent: all wait confirmWait, so the list stays in the order of deadlines
	// (walking back covers a RequestTimeout changed meanwhile).
	at := w.tail
	for at != nil && at.deadline.After(cf.deadline) {
		at = at.prev
	}
	cf.prev = at
	if at != nil {
		cf.next, at.next = at.next, cf
	} else {
		cf.next, w.head = w.head, cf
	}
	if cf.next != nil {
		cf.next.prev = cf
	} else {
		w.tail = cf
	}
	if !w.armed || cf.deadline.Before(w.at) {
		w.armed, w.at = true, cf.deadline
		wait := time.Until(cf.deadline)
		if w.timer == nil {
			w.timer = time.AfterFunc(wait, c.sweep)
		} else {
			w.timer.Reset(wait)
		}
	}
	if done := cf.ctx.Done(); done != nil {
		wt, ok := w.watched[done]
		if !ok {
			if w.watched == nil {
				w.watched = make(map[<-chan struct{}]*watch)
			}
			ctx := cf.ctx
			wt = &watch{stop: context.AfterFunc(ctx, func() {
				c.failWhere(func(cf *confirmation) bool { return cf.ctx.Done() == done }, func(cf *confirmation) error {
					return fmt.Errorf("stopped waiting for the server to confirm the %s (the server may have applied it): %w: %w", cf.what, ErrSettlementUnknown, ctx.Err())
				})
			})}
			w.watched[done] = wt
		}
		wt.n++
	}
}

// doneLocked takes cf out of the map and the list, and d out of hand (remembered as settled with
// cf's frame when ok). It reports whether the inbox can be unsubscribed now.
func (c *consumer) doneLocked(cf *confirmation, ok bool) bool {
	w := &c.cf
	delete(w.pending, cf.token)
	cf.waiting = false
	if cf.prev != nil {
		cf.prev.next = cf.next
	} else {
		w.head = cf.next
	}
	if cf.next != nil {
		cf.next.prev = cf.prev
	} else {
		w.tail = cf.prev
	}
	cf.prev, cf.next = nil, nil
	if done := cf.ctx.Done(); done != nil {
		if wt, ok := w.watched[done]; ok {
			if wt.n--; wt.n == 0 {
				wt.stop()
				delete(w.watched, done)
			}
		}
	}
	d := cf.d
	if f, in := c.flights[d.seq]; in && f.d == d {
		f.conf = nil
		delete(c.flights, d.seq)
	}
	if ok {
		c.recent.add(d.key, cf.body)
	}
	return w.closed && len(w.pending) == 0 && w.sub != nil
}

// reportConfirmed reports cf's settlement (outside flyMu).
func (c *consumer) reportConfirmed(cf *confirmation, err error) {
	d := cf.d
	if err == nil {
		c.lastDone.Store(d)
	} else {
		err = c.settleErr(d, cf.v, err)
	}
	cf.settled(d, cf.v, err)
}

// unlockAndFinish ends cf with err (nil: confirmed): out of the map, the list and hand, then,
// with flyMu released (it is held on entry), the inbox unsubscribed if it is time and the
// settlement reported.
func (c *consumer) unlockAndFinish(cf *confirmation, err error) {
	unsub := c.doneLocked(cf, err == nil)
	c.flyMu.Unlock()
	c.unsubscribe(unsub)
	c.reportConfirmed(cf, err)
}

// refusedLocked counts a send of cf that was refused with err, and reports whether none is
// left to be answered (cf then fails with its first refusal, cf.first).
func refusedLocked(cf *confirmation, err error) bool {
	cf.sent--
	if cf.first == nil {
		cf.first = err
	}
	return cf.sent <= 0
}

// answered is the inbox's handler: an answer of the server to a confirmed frame.
func (c *consumer) answered(m *nats.Msg) {
	tok, err := strconv.ParseUint(m.Subject[min(len(c.cf.inbox), len(m.Subject)):], 10, 64)
	if err != nil {
		return
	}
	var refused error
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		refused = nats.ErrNoResponders
	}
	c.flyMu.Lock()
	cf, ok := c.cf.pending[tok]
	if !ok { // failed already, or the answer to a frame sent again for a settled sequence
		c.flyMu.Unlock()
		return
	}
	if refused != nil {
		if !refusedLocked(cf, refused) { // another send of it may still be answered
			c.flyMu.Unlock()
			return
		}
		refused = cf.first
	}
	c.unlockAndFinish(cf, refused)
}

// refused counts a send of cf that failed; cf fails when none is left to be answered.
func (c *consumer) refused(cf *confirmation, err error) {
	c.flyMu.Lock()
	if !cf.waiting || !refusedLocked(cf, err) {
		c.flyMu.Unlock()
		return
	}
	c.unlockAndFinish(cf, cf.first)
}

// sweep is the timer: the confirmations past their deadline fail.
func (c *consumer) sweep() {
	now := time.Now()
	var due []*confirmation
	unsub := false
	c.flyMu.Lock()
	w := &c.cf
	for w.head != nil && !w.head.deadline.After(now) {
		cf := w.head
		due = append(due, cf)
		unsub = c.doneLocked(cf, false) || unsub
	}
	if w.head != nil {
		w.at = w.head.deadline
		w.timer.Reset(time.Until(w.at))
	} else {
		w.armed = false
	}
	c.flyMu.Unlock()
	c.unsubscribe(unsub)
	for _, cf := range due {
		c.reportConfirmed(cf, fmt.Errorf("the server did not confirm the %s within %v (its answer was lost, or it ignored the frame for a delivery it forgot in a crash; if it did not apply it, the message comes back after its AckWait): %w: %w",
			cf.what, c.confirmWait(), ErrSettlementUnknown, context.DeadlineExceeded))
	}
}

// disconnected fails every confirmation waiting: the connection dropped, their answers will not
// come.
func (c *consumer) disconnected() {
	c.failWhere(func(*confirmation) bool { return true }, func(cf *confirmation) error {
		return fmt.Errorf("the connection dropped before the server confirmed the %s (the server may have applied it; the message comes back after its AckWait if it was lost): %w: %w",
			cf.what, ErrSettlementUnknown, context.Canceled)
	})
}

// failWhere fails the confirmations waiting that match, with the error cause gives.
func (c *consumer) failWhere(match func(*confirmation) bool, cause func(*confirmation) error) {
	var due []*confirmation
	unsub := false
	c.flyMu.Lock()
	for cf := c.cf.head; cf != nil; {
		next := cf.next
		if match(cf) {
			due = append(due, cf)
			unsub = c.doneLocked(cf, false) || unsub
		}
		cf = next
	}
	c.flyMu.Unlock()
	c.unsubscribe(unsub)
	for _, cf := range due {
		c.reportConfirmed(cf, cause(cf))
	}
}

// closeConfirmer stops watching contexts, and unsubscribes the inbox now if nothing waits, or
// once the last confirmation waiting is done (answered, or failed by its deadline).
func (c *consumer) closeConfirmer() {
	c.flyMu.Lock()
	w := &c.cf
	w.closed = true
	for done, wt := range w.watched {
		wt.stop()
		delete(w.watched, done)
	}
	unsub := len(w.pending) == 0 && w.sub != nil
	c.flyMu.Unlock()
	c.unsubscribe(unsub)
}

func (c *consumer) unsubscribe(now bool) {
	if !now {
		return
	}
	c.flyMu.Lock()
	sub := c.cf.sub
	c.cf.sub = nil
	c.flyMu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}
