package redisq

import (
	"strconv"
	"sync"
	"time"
)

// Delays live in Redis: a retry after d moves the entry into the stream's delay set (a sorted
// set scored by the due time in unix milliseconds, on the App's clock), and every subscription
// of the stream moves due entries back to the stream's end with moveScript, which does it
// atomically. A subscription wakes for the delays it made itself, for the earliest delay it saw
// waiting, and at least every DelayPoll for delays made by other processes. A delay survives
// every restart of the service (and of Redis, as far as its persistence goes); the processes'
// clocks should agree, as the due time is written by one and read by another.

// moveBatch bounds the entries one moveScript call moves.
const moveBatch = 256

// delayWake tells the mover loop of a due time earlier than the one it waits for.
type delayWake struct {
	mu     sync.Mutex
	next   int64 // unix milliseconds of the earliest due time known, 0 when none
	notify chan struct{}
}

func (w *delayWake) init() { w.notify = make(chan struct{}, 1) }

// note records a delay due at due (unix milliseconds).
func (w *delayWake) note(due int64) {
	w.mu.Lock()
	earlier := w.next == 0 || due < w.next
	if earlier {
		w.next = due
	}
	w.mu.Unlock()
	if earlier {
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
}

// take returns the earliest due time known and forgets it.
func (w *delayWake) take() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.next
	w.next = 0
	return n
}

// moveDue runs until Close, moving due delayed entries to the stream.
func (s *source) moveDue() {
	defer s.loops.Done()
	t := s.clock.NewTimer(0)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
		case <-s.delay.notify:
		}
		now := s.clock.Now()
		next, err := s.moveOnce(now.UnixMilli())
		if err != nil {
			failures++
			if failures == 1 || failures%100 == 0 { // one line per streak, then every hundredth
				s.log.Warn("redis: moving due delayed entries to the stream failed; trying again",
					"stream", s.cfg.stream, "delay_set", s.cfg.delayed, "failures", failures, "error", err)
			}
		} else {
			failures = 0
		}
		if known := s.delay.take(); known != 0 && (next == 0 || known < next) {
			next = known
		}
		wait := s.cfg.poll
		if next != 0 {
			wait = min(wait, max(time.UnixMilli(next).Sub(now), time.Millisecond))
		}
		t.Reset(wait)
	}
}

// moveOnce moves what is due at now (unix milliseconds) and returns the next due time (0 when
// none waits).
func (s *source) moveOnce(now int64) (int64, error) {
	for {
		r, err := moveScript.Run(s.ctx, s.rdb, s.delayKey, now, moveBatch).Slice()
		if err != nil {
			return 0, err
		}
		moved, _ := r[0].(int64)
		var next int64
		if len(r) > 1 {
			if sc, ok := r[1].(string); ok {
				f, _ := parseScore(sc)
				next = f
			}
		}
		if moved < moveBatch {
			return next, nil
		}
	}
}

func parseScore(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	return int64(f), err
}
