package natsjs

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core"
)

// Finish performs v on the delivery, as JetStream's acknowledgement protocol:
//
//	ack             +ACK as a double ack the server confirms (UnconfirmedAcks: +ACK, batched)
//	drop            +TERM: never delivered again
//	retry           -NAK: delivered again at once, NumDelivered raised
//	retry after d   -NAK {"delay": d}: the server holds the message for d
//	dead letter     a copy with the dead-letter headers is published to the destination and
//	                acknowledged by JetStream, then +TERM
//	abandoned       -NAK without delay: delivered again at once
//
// An ack is reported once the server confirmed it (with UnconfirmedAcks, once written); other
// settlements once their frame is written. A frame that fails is reported as the settlement's
// error, and the message comes back when its AckWait runs out.
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
		actx, cancel := context.WithCancel(ctx)
		k := c.confirms.add(cancel)
		err = del.msg.DoubleAck(actx)
		c.confirms.remove(k)
		if err != nil && actx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("the connection dropped before the server confirmed the ack (the message comes back after its AckWait if the ack was lost): %w", err)
		}
		cancel()
	case core.ActDrop:
		err = del.msg.Term()
	case core.ActRetryAfter:
		if v.Delay > 0 {
			err = del.msg.NakWithDelay(v.Delay)
		} else {
			err = del.msg.Nak()
		}
	case core.ActDeadLetter:
		c.deadLetter(ctx, del, v, settled)
		return
	default: // core.ActRetry, core.ActAbandon
		err = del.msg.Nak()
	}
	c.untrack(del)
	if err == nil && (v.Action == core.ActRetry || v.Action == core.ActRetryAfter || v.Action == core.ActAbandon) {
		c.returned.add(del.seq) // its redelivery is settle's own doing, not a crash's
	}
	if err == nil && (v.Action == core.ActAck || v.Action == core.ActDrop) {
		c.lastDone.Store(del)
	}
	if err != nil {
		err = fmt.Errorf("natsjs: %s of stream %q sequence %d: %w", v.Action, c.cfg.stream, del.seq, err)
	}
	settled(d, v, err)
}
