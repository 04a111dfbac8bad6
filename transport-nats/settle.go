package natsjs

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core"
)

// Finish performs v on the delivery, as JetStream's acknowledgement protocol:
//
//	ack             +ACK as a double ack the server confirms (UnconfirmedAcks: +ACK, batched)
//	drop            +TERM: never delivered again; a request the server confirms (UnconfirmedAcks:
//	                written without waiting)
//	retry           -NAK: delivered again at once, NumDelivered raised
//	retry after d   -NAK {"delay": d}: the server holds the message for d
//	dead letter     a copy with the dead-letter headers is published to the destination and
//	                acknowledged by JetStream, then +TERM (confirmed like a drop's)
//	abandoned       -NAK without delay: delivered again at once
//
// An ack, a drop and a dead letter's +TERM are reported once the server confirmed them (with
// UnconfirmedAcks, once written); the others (-NAK, which only brings the message back sooner)
// once their frame is written. A frame that fails, or that the server does not confirm, is
// reported as the settlement's error, and the message comes back when its AckWait runs out. (A
// +TERM written while the server shuts down arrives at a consumer that is closing: the server
// drops it without a word, and the message is delivered again after the restart; written
// without a confirmation it would have been reported done.)
//
// A confirmation is awaited for at most RequestTimeout (and at most the AckWait) without holding
// the worker: Finish returns at once and the worker goes on; the answer, matched on the
// subscription's reply inbox, reports the settlement (confirm.go). The settlement goes to the newest
// delivery of the message's stream sequence: one the server delivered again while this delivery
// was in hand is not handed out, and settled with it (inflight.go).
func (c *consumer) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	del, ok := d.(*Delivery)
	if !ok || del.src != c {
		settled(d, v, fmt.Errorf("natsjs: Finish given a delivery of another subscription (%T %s)", d, d.ID()))
		return
	}
	c.gate.release(del)
	if v.Action != core.ActAbandon && !del.suspect {
		c.win.settledClean()
	}
	var err error
	switch v.Action {
	case core.ActAck:
		if !c.cfg.confirmAcks {
			c.acks.add(del, v, settled)
			return
		}
		c.untrack(del) // no +WPI while the ack waits for its confirmation
		c.confirmed(ctx, del, v, settled, "ack", ackFrame)
		return
	case core.ActDrop:
		c.term(ctx, del, v, settled)
		return
	case core.ActRetryAfter:
		err = c.nak(del, v.Delay)
	case core.ActDeadLetter:
		c.deadLetter(ctx, del, v, settled)
		return
	default: // core.ActRetry, core.ActAbandon
		err = c.nak(del, 0)
	}
	c.untrack(del)
	if err == nil {
		c.returned.add(del.seq) // its redelivery is settle's own doing, not a crash's
	}
	if err != nil {
		err = fmt.Errorf("natsjs: %s of stream %q sequence %d: %w", v.Action, c.cfg.stream, del.seq, err)
	}
	settled(d, v, err)
}

// written completes an ack's or a termination's settlement: d out of hand (remembered as settled
// with frame when err is nil), reported.
func (c *consumer) written(d *Delivery, v core.Verdict, settled core.Settled, err error, frame []byte) {
	if err == nil {
		c.land(d, frame)
		c.lastDone.Store(d)
	} else {
		c.land(d, nil)
		err = c.settleErr(d, v, err)
	}
	settled(d, v, err)
}

// term ends d with +TERM (a drop, or the original of a stored dead letter): confirmed by the
// server's answer under confirmAcks, otherwise reported once written.
func (c *consumer) term(ctx context.Context, d *Delivery, v core.Verdict, settled core.Settled) {
	if c.cfg.confirmAcks {
		c.untrack(d) // no +WPI while the +TERM waits for its confirmation
		c.confirmed(ctx, d, v, settled, "+TERM", termFrame)
		return
	}
	err := c.target(d).Term()
	c.untrack(d)
	c.written(d, v, settled, err, termFrame)
}

// settleErr is the error of d's settlement v that failed with err, naming the frame, the stream
// and the sequence.
func (c *consumer) settleErr(d *Delivery, v core.Verdict, err error) error {
	what := v.Action.String()
	if v.Action == core.ActDeadLetter {
		what = "+TERM after dead letter"
	}
	return fmt.Errorf("natsjs: %s of stream %q sequence %d: %w", what, c.cfg.stream, d.seq, err)
}
