package redisq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
)

// Ops is the operations view (ops.Queue) of a Queue and its dead-letter stream: depth by
// state, and the dead letters listed, shown, redriven and purged. A dead letter's id is its entry
// id in the dead-letter stream.
type Ops struct {
	q     *Queue
	dead  string
	clock clock.Clock
}

var _ ops.Queue = (*Ops)(nil)

// NewOps returns the operations view of q with the dead-letter stream at key dead ("" when the
// queue has none: Dead is then 0 and dead-letter operations fail with ops.ErrNoDeadLetter).
func NewOps(q *Queue, dead string) (*Ops, error) {
	if q == nil {
		return nil, errors.New("redisq.NewOps: no queue")
	}
	if dead == q.cfg.stream {
		return nil, fmt.Errorf("redisq.NewOps: the dead-letter stream %q is the queue's own stream", dead)
	}
	return &Ops{q: q, dead: dead, clock: q.c.clock}, nil
}

// Stats measures the stream: Ready counts the entries the group has not taken (and entries given
// back count as in flight until claimed), InFlight the group's pending entries, Delayed the delay
// set, Dead the dead-letter stream; OldestReady is the age of the oldest entry the group has not
// taken, by its id's time.
func (o *Ops) Stats(ctx context.Context) (ops.Stats, error) {
	rdb, err := o.q.c.client()
	if err != nil {
		return ops.Stats{}, err
	}
	cfg := o.q.cfg
	s := ops.Stats{Queue: cfg.stream, DeadLetter: o.dead}
	p := rdb.Pipeline()
	length := p.XLen(ctx, cfg.stream)
	delayed := p.ZCard(ctx, cfg.delayed)
	var dead *redis.IntCmd
	if o.dead != "" {
		dead = p.XLen(ctx, o.dead)
	}
	groups := p.XInfoGroups(ctx, cfg.stream)
	_, _ = p.Exec(ctx)
	if err := firstErr(length, delayed, dead); err != nil {
		return s, fmt.Errorf("redisq: stats of stream %q at %s: %w", cfg.stream, o.q.c.addr(), err)
	}
	s.Delayed = delayed.Val()
	if dead != nil {
		s.Dead = dead.Val()
	}
	after := "-"
	if gs, err := groups.Result(); err == nil {
		for _, g := range gs {
			if g.Name == cfg.group {
				s.InFlight = g.Pending
				after = "(" + g.LastDeliveredID
			}
		}
	} else if !isNoSuchKey(err) {
		return s, fmt.Errorf("redisq: XINFO GROUPS of stream %q at %s: %w", cfg.stream, o.q.c.addr(), err)
	}
	s.Ready = max(length.Val()-s.InFlight, 0)
	s.At = o.clock.Now()
	if s.Ready > 0 {
		first, err := rdb.XRangeN(ctx, cfg.stream, after, "+", 1).Result()
		if err != nil {
			return s, fmt.Errorf("redisq: oldest entry of stream %q at %s: %w", cfg.stream, o.q.c.addr(), err)
		}
		if len(first) == 1 {
			if ms, ok := entryTime(first[0].ID); ok {
				s.OldestReady = max(s.At.Sub(time.UnixMilli(ms)), 0)
			}
		}
	}
	return s, nil
}

func firstErr(cmds ...*redis.IntCmd) error {
	for _, c := range cmds {
		if c != nil && c.Err() != nil {
			return c.Err()
		}
	}
	return nil
}

func isNoSuchKey(err error) bool { return err != nil && strings.Contains(err.Error(), "no such key") }

// entryTime is the unix millisecond part of a stream entry id.
func entryTime(id string) (int64, bool) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil
}

// scanBatch is how many dead letters one XRANGE of a listing reads.
const scanBatch = 200

// ListDead returns one page of the dead letters matching f, oldest first.
func (o *Ops) ListDead(ctx context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	rdb, err := o.deadClient()
	if err != nil {
		return ops.DeadPage{}, err
	}
	limit := p.LimitOf()
	start := "-"
	if p.After != "" {
		start = "(" + p.After
	}
	var page ops.DeadPage
	for {
		batch, err := rdb.XRangeN(ctx, o.dead, start, "+", scanBatch).Result()
		if err != nil {
			return page, fmt.Errorf("redisq: list dead-letter stream %q at %s: %w", o.dead, o.q.c.addr(), err)
		}
		for _, e := range batch {
			d := deadLetter(e)
			if !f.Match(d) {
				continue
			}
			if len(page.Items) == limit {
				page.Next = page.Items[limit-1].ID
				return page, nil
			}
			page.Items = append(page.Items, d)
		}
		if len(batch) < scanBatch {
			return page, nil
		}
		start = "(" + batch[len(batch)-1].ID
	}
}

// deadLetter reads a dead-letter stream entry.
func deadLetter(e redis.XMessage) ops.DeadLetter {
	d := ops.DeadLetter{ID: e.ID, Headers: make(map[string]string, len(e.Values))}
	for k, v := range e.Values {
		s, _ := v.(string)
		if k == BodyField {
			d.Payload = []byte(s)
			continue
		}
		d.Headers[k] = s
	}
	_ = d.ReadHeaders() // a malformed header leaves its field unset; the header is shown as is
	return d
}

// GetDead returns one dead letter by its entry id.
func (o *Ops) GetDead(ctx context.Context, id string) (ops.DeadLetter, error) {
	rdb, err := o.deadClient()
	if err != nil {
		return ops.DeadLetter{}, err
	}
	e, ok, err := o.entry(ctx, rdb, id)
	if err != nil {
		return ops.DeadLetter{}, err
	}
	if !ok {
		return ops.DeadLetter{}, &ops.NotFoundError{DeadLetter: "redis stream " + strconv.Quote(o.dead), IDs: []string{id}}
	}
	return deadLetter(e), nil
}

// entry reads one entry of the dead-letter stream; an id that is not a stream id is not found.
func (o *Ops) entry(ctx context.Context, rdb redis.UniversalClient, id string) (redis.XMessage, bool, error) {
	es, err := rdb.XRange(ctx, o.dead, id, id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return redis.XMessage{}, false, nil
		}
		return redis.XMessage{}, false, fmt.Errorf("redisq: read dead letter %s of stream %q at %s: %w", id, o.dead, o.q.c.addr(), err)
	}
	if len(es) != 1 || es[0].ID != id {
		return redis.XMessage{}, false, nil
	}
	return es[0], true, nil
}

// redriveScript deletes entry ARGV[1] from the dead-letter stream KEYS[1] and, when it was
// there, adds ARGV[2], ARGV[3], ... as a new entry of the stream KEYS[2]; it returns 1 when it
// moved it, 0 when another redrive or purge had taken it.
var redriveScript = redis.NewScript(`
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
local f = {}
for i = 2, #ARGV do f[i - 1] = ARGV[i] end
redis.call('XADD', KEYS[2], '*', unpack(f))
return 1
`)

// Redrive moves the selected dead letters back to the stream they came from (settle-origin, or
// this queue's), each in one script: deleted from the dead-letter stream and added to the origin
// at once. The copy keeps its body, its headers and its message id (IDField); the dead-letter
// headers go, and settle-retry-count too unless o.KeepAttempts.
func (o *Ops) Redrive(ctx context.Context, s ops.Selection, ro ops.RedriveOptions) (int, error) {
	return o.each(ctx, s, func(rdb redis.UniversalClient, d ops.DeadLetter) (bool, error) {
		origin := d.Origin
		if origin == "" {
			origin = o.q.cfg.stream
		}
		h := ops.RedriveHeaders(d.Headers, ro.KeepAttempts)
		args := make([]any, 0, 3+2*len(h))
		args = append(args, d.ID, BodyField, d.Payload)
		for k, v := range h {
			args = append(args, k, v)
		}
		n, err := redriveScript.Run(ctx, rdb, []string{o.dead, origin}, args...).Int()
		if err == nil && n == 1 && ro.Moved != nil {
			ro.Moved([]string{d.ID})
		}
		return n == 1, err
	})
}

// Purge deletes the selected dead letters (XDEL).
func (o *Ops) Purge(ctx context.Context, s ops.Selection) (int, error) {
	return o.each(ctx, s, func(rdb redis.UniversalClient, d ops.DeadLetter) (bool, error) {
		n, err := rdb.XDel(ctx, o.dead, d.ID).Result()
		return n == 1, err
	})
}

// each applies act to every selected dead letter and counts those it changed. A selection of ids
// is checked whole first: one unknown id changes nothing.
func (o *Ops) each(ctx context.Context, s ops.Selection, act func(redis.UniversalClient, ops.DeadLetter) (bool, error)) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	rdb, err := o.deadClient()
	if err != nil {
		return 0, err
	}
	var picked []ops.DeadLetter
	if len(s.IDs) > 0 {
		var missing []string
		for _, id := range s.IDs {
			e, ok, err := o.entry(ctx, rdb, id)
			if err != nil {
				return 0, err
			}
			if !ok {
				missing = append(missing, id)
				continue
			}
			picked = append(picked, deadLetter(e))
		}
		if len(missing) > 0 {
			return 0, &ops.NotFoundError{DeadLetter: "redis stream " + strconv.Quote(o.dead), IDs: missing}
		}
	} else if picked, err = ops.Collect(ctx, o, s.Filter, 0); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range picked {
		done, err := act(rdb, d)
		if err != nil {
			return n, fmt.Errorf("redisq: dead letter %s of stream %q at %s: %w", d.ID, o.dead, o.q.c.addr(), err)
		}
		if done {
			n++
		}
	}
	return n, nil
}

func (o *Ops) deadClient() (redis.UniversalClient, error) {
	if o.dead == "" {
		return nil, fmt.Errorf("redisq: stream %q: %w", o.q.cfg.stream, ops.ErrNoDeadLetter)
	}
	return o.q.c.client()
}
