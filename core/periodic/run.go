package periodic

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// publishAttempts bounds the publishes of a won tick; publishBackoff is the first wait between them.
const (
	publishAttempts = 5
	publishBackoff  = 500 * time.Millisecond
)

// run waits for each tick of j and fires it, until ctx ends.
func (s *Scheduler) run(ctx context.Context, j *job) {
	now := s.clock.Now()
	if j.catchUp > 0 {
		if prev, _ := latest(j.sched, now.Add(-j.catchUp), now); !prev.IsZero() {
			s.fire(ctx, j, prev, "catch-up")
		}
	}
	next := j.sched.Next(now)
	for {
		j.mu.Lock()
		j.next = next
		j.mu.Unlock()
		if next.IsZero() {
			s.log.Info("periodic: the schedule has no further tick; the job ends", "schedule", j.name, "spec", j.sched.String())
			return
		}
		t := s.clock.NewTimer(next.Sub(s.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		now := s.clock.Now()
		due, missed := latest(j.sched, next.Add(-time.Nanosecond), now)
		if due.IsZero() { // a clock that woke the timer before its time
			due, missed = next, 1
		}
		if missed > 1 {
			s.log.Warn("periodic: several ticks were due at once (the process was suspended or the clock jumped); publishing the latest",
				"schedule", j.name, "tick", due, "missed", missed-1)
		}
		s.fire(ctx, j, due, "tick")
		next = j.sched.Next(maxTime(due, now))
	}
}

// latest returns the last tick of sched in (from, until] and how many ticks lie there.
func latest(sched Schedule, from, until time.Time) (time.Time, int) {
	var last time.Time
	n := 0
	for t := sched.Next(from); !t.IsZero() && !t.After(until); t = sched.Next(t) {
		last = t
		n++
	}
	return last, n
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fireTimeout bounds the claim and publish of one tick; a scheduler being closed waits for them.
const fireTimeout = 30 * time.Second

// fire claims tick and publishes it when this process won. A tick begun is finished when the
// scheduler closes meanwhile: a claim won and then abandoned would lose the tick.
func (s *Scheduler) fire(run context.Context, j *job, tick time.Time, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run), fireTimeout)
	defer cancel()
	id := TickID(j.name, tick)
	won, finish, err := s.claim(ctx, j.name, tick)
	if err != nil {
		s.failed(j, tick, "periodic: claiming a tick failed; another process may publish it", id, err)
		return
	}
	if !won {
		s.log.Debug("periodic: tick claimed by another process", "schedule", j.name, "tick", tick, "message_id", id)
		s.handled(j, tick, false)
		return
	}
	opts := append(j.opts[:len(j.opts):len(j.opts)], core.MessageID(id))
	if j.dedup {
		opts = append(opts, core.DedupKey(id))
	}
	t := Tick{Schedule: j.name, At: tick, ID: id}
	var wait time.Duration
	for attempt := 1; ; attempt++ {
		err = j.publish(ctx, t, opts)
		if err == nil || attempt == publishAttempts || run.Err() != nil || ctx.Err() != nil {
			break // a closing scheduler tries no more: the claim is given up (HoldingClaimer)
		}
		s.log.Warn("periodic: publishing a tick failed; trying again", "schedule", j.name, "tick", tick,
			"message_id", id, "attempt", attempt, "error", err)
		wait = clock.Backoff(wait, publishBackoff, 8*publishBackoff)
		if clock.Sleep(run, s.clock, wait) != nil {
			break
		}
	}
	if finish != nil {
		// A failed publish gives the claim up, so that a process still asking may publish.
		if ferr := finish(context.WithoutCancel(ctx), err == nil); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		s.failed(j, tick, "periodic: publishing a tick failed", id, err)
		return
	}
	s.log.Debug("periodic: tick published", "schedule", j.name, "tick", tick, "message_id", id, "why", why)
	s.handled(j, tick, true)
}

func (s *Scheduler) claim(ctx context.Context, name string, tick time.Time) (bool, func(context.Context, bool) error, error) {
	if h, ok := s.claims.(HoldingClaimer); ok {
		return h.HoldTick(ctx, name, tick)
	}
	won, err := s.claims.ClaimTick(ctx, name, tick)
	return won, nil, err
}

func (s *Scheduler) handled(j *job, tick time.Time, published bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if tick.After(j.last) {
		j.last = tick
	}
	if published {
		j.published++
		j.lastErr = ""
	}
}

func (s *Scheduler) failed(j *job, tick time.Time, msg, id string, err error) {
	s.log.Warn(msg, "schedule", j.name, "tick", tick, "message_id", id, "attempt", 1, "error", err)
	j.mu.Lock()
	j.lastErr = err.Error()
	j.mu.Unlock()
}

// prune forgets old claims every hour.
func (s *Scheduler) prune(ctx context.Context, p Pruner) {
	for {
		if clock.Sleep(ctx, s.clock, time.Hour) != nil {
			return
		}
		n, err := p.PruneTicks(ctx, s.clock.Now().Add(-s.retain))
		if err != nil {
			s.log.Warn("periodic: pruning old tick claims failed", "error", err)
			continue
		}
		s.log.Debug("periodic: old tick claims pruned", "rows", n)
	}
}
