package natsjs

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core"
)

// Finish performs v on the delivery, as JetStream's acknowledgement protocol:
//
//	ack             +ACK (with ConfirmAcks, a double ack the server confirms)
//	drop            +TERM: never delivered again
//	retry           -NAK: delivered again at once, NumDelivered raised
//	retry after d   -NAK {"delay": d}: the server holds the message for d
//	dead letter     a copy with the dead-letter headers is published to the destination and
//	                acknowledged by JetStream, then +TERM
//	abandoned       -NAK without delay: delivered again at once
//
// Each settlement is reported once the acknowledgement is written (or confirmed, with
// ConfirmAcks); a write that fails is reported as the settlement's error, and the message comes
// back when its AckWait runs out. +ACKs are written in batches (see acks).
func (c *consumer) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	del, ok := d.(*Delivery)
	if !ok || del.src != c {
		settled(d, v, fmt.Errorf("natsjs: Finish given a delivery of another subscription (%T %s)", d, d.ID()))
		return
	}
	var err error
	switch v.Action {
	case core.ActAck:
		if !c.cfg.confirmAcks {
			c.acks.add(del, v, settled)
			return
		}
		err = del.msg.DoubleAck(ctx)
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
