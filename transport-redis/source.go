package redisq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// source is one subscription on a Queue: its consumer in the group, the entries it read and has
// not handed out yet, and the loops that extend its leases and move its due delays. It is both
// the subscription's core.Source and its core.Finisher.
type source struct {
	cfg       queueConfig
	rdb       redis.UniversalClient
	log       *slog.Logger
	clock     clock.Clock
	addr      string
	consumer  string
	batch     int
	keys      []string // the stream
	delayKey  []string // the stream and its delay set
	dedupKeys []string // the stream and its dedup index

	// Owned by Next (core never calls it concurrently).
	buf          []*Delivery
	cursor       string    // where the next XAUTOCLAIM scan of the pending list starts
	reclaimAfter time.Time // when the next reclaim round is due; zero: at once
	readArgs     redis.XReadGroupArgs

	ctx    context.Context // ends at Close; the loops' lifetime
	cancel context.CancelFunc
	loops  sync.WaitGroup
	once   sync.Once

	leaseMu sync.Mutex
	head    *Delivery // deliveries read and not settled (lease.go)

	delay delayWake // delay.go
	acks  acker     // ack.go
}

var (
	_ core.Source   = (*source)(nil)
	_ core.Finisher = (*source)(nil)
)

func newSource(q *Queue, rdb redis.UniversalClient, sub core.Subscription) *source {
	cfg := q.cfg
	batch := cfg.batch
	if batch == 0 {
		batch = max(sub.Options.Workers, 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &source{cfg: cfg, rdb: rdb, log: sub.Logger, clock: sub.Clock, addr: q.c.addr(),
		consumer: consumerName(), batch: batch, keys: []string{cfg.stream},
		delayKey: []string{cfg.stream, cfg.delayed}, dedupKeys: []string{cfg.stream, cfg.dedup}, cursor: "0-0", ctx: ctx, cancel: cancel}
	s.readArgs = redis.XReadGroupArgs{Group: cfg.group, Consumer: s.consumer,
		Streams: []string{cfg.stream, ">"}, Count: int64(batch), Block: cfg.block}
	s.delay.init()
	s.acks.wake = make(chan struct{}, 1)
	s.loops.Add(3)
	go s.extend()
	go s.moveDue()
	go s.settleAcks()
	return s
}

// consumerName is a consumer name no other process uses: host, process id and random bits.
func consumerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "settle-" + host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Next hands out the next entry: one read before and not handed out yet, else one claimed back
// from the pending list (its lease ran out, or it was given back), else a new one
// (XREADGROUP >, waiting up to the Block time on the server, then again).
func (s *source) Next(ctx context.Context) (core.Delivery, error) {
	for {
		if len(s.buf) > 0 {
			d := s.buf[0]
			s.buf[0] = nil
			s.buf = s.buf[1:]
			return d, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !s.clock.Now().Before(s.reclaimAfter) {
			if err := s.reclaim(ctx); err != nil {
				return nil, err
			}
			if len(s.buf) > 0 {
				continue
			}
		}
		if err := s.read(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}

// read takes new entries with XREADGROUP.
func (s *source) read(ctx context.Context) error {
	res, err := s.rdb.XReadGroup(ctx, &s.readArgs).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redisq: XREADGROUP of stream %q group %q at %s: %w", s.cfg.stream, s.cfg.group, s.addr, err)
	}
	for _, st := range res {
		for _, m := range st.Messages {
			fields := make([]string, 0, 2*len(m.Values))
			for k, v := range m.Values {
				str, _ := v.(string)
				fields = append(fields, k, str)
			}
			d := newDelivery(s, m.ID, fields, 1, false)
			s.track(d)
			s.buf = append(s.buf, d)
		}
	}
	return nil
}

// reclaimScans bounds the XAUTOCLAIM calls of one Next: a long pending list of entries still
// held is scanned over several calls rather than all at once.
const reclaimScans = 8

// reclaim claims entries whose lease ran out (XAUTOCLAIM, through claimScript) into the buffer.
// A round scans the whole pending list; the next one is due half a lease after it ends.
func (s *source) reclaim(ctx context.Context) error {
	for range reclaimScans {
		r, err := claimScript.Run(ctx, s.rdb, s.keys, s.cfg.group, s.consumer,
			s.cfg.lease.Milliseconds(), s.cursor, s.batch).Slice()
		if err != nil {
			return fmt.Errorf("redisq: XAUTOCLAIM of stream %q group %q at %s: %w", s.cfg.stream, s.cfg.group, s.addr, err)
		}
		if err := s.claimed(r); err != nil {
			return err
		}
		if s.cursor == "0-0" {
			s.reclaimAfter = s.clock.Now().Add(max(s.cfg.lease/2, 50*time.Millisecond))
			return nil
		}
		if len(s.buf) > 0 {
			return nil
		}
	}
	// A long pending list of entries still held: go on with the scan a little later rather than
	// at every Next.
	s.reclaimAfter = s.clock.Now().Add(max(s.cfg.lease/20, 10*time.Millisecond))
	return nil
}

// claimed reads claimScript's reply {cursor, entries, counts} into the buffer.
func (s *source) claimed(r []any) error {
	bad := fmt.Errorf("redisq: unexpected XAUTOCLAIM reply from stream %q: %v", s.cfg.stream, r)
	if len(r) != 3 {
		return bad
	}
	cursor, ok1 := r[0].(string)
	entries, ok2 := r[1].([]any)
	counts, ok3 := r[2].([]any)
	if !ok1 || !ok2 || !ok3 || len(counts) != len(entries) {
		return bad
	}
	s.cursor = cursor
	for i, e := range entries {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return bad
		}
		id, _ := pair[0].(string)
		raw, _ := pair[1].([]any)
		count, _ := counts[i].(int64)
		fields := make([]string, len(raw))
		for j, f := range raw {
			fields[j], _ = f.(string)
		}
		d := newDelivery(s, id, fields, int(count), true)
		s.track(d)
		s.buf = append(s.buf, d)
	}
	return nil
}

// Close stops the loops, gives back the entries read and not handed out, and removes the
// consumer from the group when it holds nothing (a consumer holding given-back entries stays
// until they are claimed; ops can remove idle consumers).
func (s *source) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.loops.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, d := range s.buf {
			s.untrack(d)
			if _, err := s.settle(ctx, releaseScript, d, s.cfg.lease.Milliseconds()); err != nil {
				s.log.Warn("redis: giving back an entry read and not handed out failed; it is claimed again once its lease runs out",
					"stream", s.cfg.stream, "message_id", d.id, "attempt", d.attempt, "error", err)
			}
		}
		s.buf = nil
		if err := dropConsumerScript.Run(ctx, s.rdb, s.keys, s.cfg.group, s.consumer).Err(); err != nil {
			s.log.Warn("redis: removing the consumer from its group failed", "stream", s.cfg.stream,
				"group", s.cfg.group, "consumer", s.consumer, "error", err)
		}
	})
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
