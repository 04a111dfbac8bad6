package redisq

import (
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
)

// Acks and drops are grouped: Finish queues them, and one goroutine per subscription settles
// what has queued in one ackScript call (each entry still checked on its own), then reports each.
// While a call runs, the next acks queue up behind it, so a busy subscription settles many
// entries per round trip and an idle one settles each at once: no timer, no added wait.

// maxAckGroup bounds the entries of one ackScript call.
const maxAckGroup = 512

type pendingAck struct {
	d       *Delivery
	v       core.Verdict
	settled core.Settled
}

// acker is the subscription's queue of acks and drops waiting for their script.
type acker struct {
	mu    sync.Mutex
	queue []pendingAck
	wake  chan struct{}
}

// add queues an ack or a drop of d.
func (a *acker) add(d *Delivery, v core.Verdict, settled core.Settled) {
	a.mu.Lock()
	a.queue = append(a.queue, pendingAck{d, v, settled})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// take swaps the queue with spare (emptied) and returns what was queued, at most maxAckGroup
// entries; the rest stays queued.
func (a *acker) take(spare []pendingAck) []pendingAck {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) <= maxAckGroup {
		got := a.queue
		a.queue = spare[:0]
		return got
	}
	got := append(spare[:0], a.queue[:maxAckGroup]...)
	a.queue = append(a.queue[:0], a.queue[maxAckGroup:]...)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return got
}

// settleAcks runs until Close, settling queued acks and drops. Core closes the source only once
// every delivery it handed out has been reported, so nothing is queued then.
func (s *source) settleAcks() {
	defer s.loops.Done()
	var spare []pendingAck
	var args []any
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.acks.wake:
		}
		group := s.acks.take(spare)
		if len(group) == 0 {
			spare = group
			continue
		}
		args = append(args[:0], s.cfg.group, s.consumer)
		for _, p := range group {
			args = append(args, p.d.entry, p.d.count, p.d.dedup, p.d.id)
		}
		res, err := ackScript.Run(s.ctx, s.rdb, s.dedupKeys, args...).Int64Slice()
		if err == nil && len(res) != len(group) {
			err = fmt.Errorf("ack script answered %d results for %d entries", len(res), len(group))
		}
		for i, p := range group {
			r := replyLost
			if err == nil {
				r = int(res[i])
			}
			p.settled(p.d, p.v, s.result(p.d, p.v, r, err))
			group[i] = pendingAck{}
		}
		spare = group
	}
}

// ackScript acknowledges and deletes the entries that are still their deliveries', and answers
// 1 or 0 for each: ARGV[3], ARGV[7], ... are the entries, each followed by its delivery count, its
// dedup key (” for none) and its message id; a dedup key the message held in KEYS[2] is released.
var ackScript = redis.NewScript(ownedLua + releaseDedupLua + `
local out = {}
for i = 3, #ARGV, 4 do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i], ARGV[i + 1]) then
    redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
    redis.call('XDEL', KEYS[1], ARGV[i])
    release(KEYS[2], ARGV[i + 2], ARGV[i + 3])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)
