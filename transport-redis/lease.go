package redisq

import "time"

// The lease of an entry is its idle time in the group's pending list: XAUTOCLAIM takes an entry
// idle for longer than the Queue's Lease. Every delivery read and not yet settled is on the
// source's lease list, and a loop on the App's clock resets the idle time of each (XCLAIM
// JUSTID, which keeps the delivery count) every third of the lease, through extendScript, which
// first checks that the entry is still the delivery's.

func (s *source) track(d *Delivery) {
	s.leaseMu.Lock()
	d.next = s.head
	if s.head != nil {
		s.head.prev = d
	}
	s.head, d.listed = d, true
	s.leaseMu.Unlock()
}

// untrack takes d off the lease list; it is settled (or about to be).
func (s *source) untrack(d *Delivery) {
	s.leaseMu.Lock()
	if d.listed {
		if d.prev != nil {
			d.prev.next = d.next
		} else {
			s.head = d.next
		}
		if d.next != nil {
			d.next.prev = d.prev
		}
		d.prev, d.next, d.listed = nil, nil, false
	}
	s.leaseMu.Unlock()
}

// extendBatch bounds the entries of one extendScript call.
const extendBatch = 256

// extend runs until Close, extending the lease of every held entry every third of the lease.
func (s *source) extend() {
	defer s.loops.Done()
	every := max(s.cfg.lease/3, 30*time.Millisecond)
	t := s.clock.NewTimer(every)
	defer t.Stop()
	var args, pairs []any
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
		}
		pairs = pairs[:0]
		s.leaseMu.Lock()
		for d := s.head; d != nil; d = d.next {
			pairs = append(pairs, d.entry, d.count)
		}
		s.leaseMu.Unlock()
		held, lost := len(pairs)/2, 0
		var firstErr error
		for start := 0; start < len(pairs); start += 2 * extendBatch {
			end := min(start+2*extendBatch, len(pairs))
			args = append(append(args[:0], s.cfg.group, s.consumer), pairs[start:end]...)
			ids, err := extendScript.Run(s.ctx, s.rdb, s.keys, args...).StringSlice()
			if err != nil && firstErr == nil && s.ctx.Err() == nil {
				firstErr = err
			}
			lost += len(ids)
		}
		if firstErr != nil || lost > 0 {
			s.log.Warn("redis: extending leases failed or found entries claimed again; those are settled by their later delivery",
				"stream", s.cfg.stream, "group", s.cfg.group, "held", held, "lost", lost, "error", firstErr)
		}
		t.Reset(every)
	}
}
