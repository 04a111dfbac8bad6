package redisq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
)

// Finish performs v on the delivery, each in one Lua script that first checks that the entry is
// still this delivery's (the pending list names this consumer and the delivery count of the
// claim; otherwise ErrLeaseLost, and nothing changes):
//
//	ack, drop       XACK and XDEL: the entry leaves the pending list and the stream; grouped
//	                with the acks and drops queued meanwhile into one script call (ack.go)
//	retry           a copy at the stream's end, settle-retry-count = this attempt; XACK, XDEL
//	retry after d   the copy goes to the delay set (sorted by due time) instead; a subscription
//	                moves it to the stream's end once due (delay.go)
//	dead letter     a copy with the dead-letter headers added to the destination stream; XACK, XDEL
//	abandoned       left pending, its idle time set to the lease: the next claim of any
//	                consumer takes it, raising its delivery count
//
// Each settlement is reported once the script returned: Redis has applied it (and, with
// appendfsync always, written it to its append-only file).
func (s *source) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	del, ok := d.(*Delivery)
	if !ok || del.src != s {
		settled(d, v, fmt.Errorf("redisq: Finish given a delivery of another subscription (%T %s)", d, d.ID()))
		return
	}
	s.untrack(del)
	if ctx.Err() != nil { // a delivery abandoned at shutdown is still given back
		ctx = context.WithoutCancel(ctx)
	}
	var r int
	var err error
	switch v.Action {
	case core.ActAck, core.ActDrop:
		s.acks.add(del, v, settled) // grouped with others (ack.go)
		return
	case core.ActRetry:
		r, err = s.settle(ctx, requeueScript, del, del.attempt, del.id, del.at)
	case core.ActRetryAfter:
		due := s.clock.Now().Add(v.Delay).UnixMilli()
		r, err = s.settleDelay(ctx, del, due)
		if err == nil && r == replyDone {
			s.delay.note(due)
		}
	case core.ActDeadLetter:
		r, err = s.deadLetter(ctx, del, v)
	default: // core.ActAbandon
		r, err = s.settle(ctx, releaseScript, del, s.cfg.lease.Milliseconds())
	}
	settled(d, v, s.result(del, v, r, err))
}

// settle runs one of the settling scripts on d's entry with its fencing token and extra args.
func (s *source) settle(ctx context.Context, script *redis.Script, d *Delivery, extra ...any) (int, error) {
	args := make([]any, 0, 4+len(extra))
	args = append(args, s.cfg.group, s.consumer, d.entry, d.count)
	args = append(args, extra...)
	n, err := script.Run(ctx, s.rdb, s.keys, args...).Int()
	return n, err
}

func (s *source) settleDelay(ctx context.Context, d *Delivery, due int64) (int, error) {
	return delayScript.Run(ctx, s.rdb, s.delayKey, s.cfg.group, s.consumer, d.entry, d.count, d.attempt, due, d.id, d.at).Int()
}

// deadLetter copies d's entry to the destination stream with the dead-letter headers.
func (s *source) deadLetter(ctx context.Context, d *Delivery, v core.Verdict) (int, error) {
	info := core.NewDeadLetterInfo(d, v, s.cfg.stream, s.clock.Now())
	return deadLetterScript.Run(ctx, s.rdb, []string{s.cfg.stream, v.Dest, s.cfg.dedup}, s.cfg.group, s.consumer, d.entry, d.count,
		d.dedup, d.id,
		IDField, d.id,
		EnqueuedField, strconv.FormatInt(d.at, 10),
		core.HeaderRetryCount, strconv.Itoa(info.Count),
		core.HeaderOrigin, info.Origin,
		core.HeaderDeadAt, info.At.UTC().Format(time.RFC3339Nano),
		core.HeaderError, info.Error).Int()
}

// result turns a script's reply into the settlement's error.
func (s *source) result(d *Delivery, v core.Verdict, r int, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("redisq: %s of stream %q entry %s at %s: %w", v.Action, s.cfg.stream, d.entry, s.addr, err)
	case r == replyLost:
		return fmt.Errorf("redisq: %s of stream %q entry %s (delivery %d): %w", v.Action, s.cfg.stream, d.entry, d.count, ErrLeaseLost)
	case r == replyGone:
		return fmt.Errorf("redisq: %s of stream %q entry %s: %w", v.Action, s.cfg.stream, d.entry, ErrEntryGone)
	}
	return nil
}

// HoldsDelays reports that retry-after delays are kept in Redis (core.DelayHolder).
func (s *source) HoldsDelays() bool { return true }
