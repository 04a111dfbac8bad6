package core

import (
	"context"
	"errors"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// enter waits for d's turn: the end of a pause of its queue (Pausable), then every limit of
// the subscription in the order they were given, on the subscription's pull context. Shutdown
// while waiting gives d back (abandoned, its attempt not counted where the backend counts at
// the handler's start). It returns the function that gives the turns back once the handler has
// returned, and false when d was settled instead.
func (s *subscription) enter(d Delivery) (func(), bool) {
	p := s.opts.pause
	for {
		if p != nil && !p.wait(s.pullCtx) {
			s.giveBack(d, s.pullCtx.Err())
			return nil, false
		}
		release, ok := s.acquire(d)
		if !ok {
			return nil, false
		}
		if p == nil {
			return release, true
		}
		p.starting.RLock()
		if !p.isPaused() {
			return func() { release(); p.starting.RUnlock() }, true
		}
		p.starting.RUnlock() // paused while d waited for its limits: wait again
		release()
	}
}

// acquire takes d's turn at every limit of the subscription; false when d was given back.
func (s *subscription) acquire(d Delivery) (func(), bool) {
	releases := make([]func(), 0, len(s.gates))
	releaseAll := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, g := range s.gates {
		var key string
		if g.key != nil {
			key = g.key(d)
		}
		rel, err := g.l.Acquire(s.pullCtx, key)
		if err == nil {
			releases = append(releases, rel)
			continue
		}
		releaseAll()
		if s.pullCtx.Err() == nil {
			// The limiter's store failed: give the delivery back after a pause, so that a
			// store that is down does not spin the claim loop.
			s.info.Logger.Warn("settle: the flow-control store failed; giving the delivery back without calling the handler",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
			s.fail(err)
			_ = clock.Sleep(s.pullCtx, s.app.clock, clock.Jitter(time.Second))
		}
		s.giveBack(d, err)
		return nil, false
	}
	return releaseAll, true
}

// giveBack abandons d, which waited for its turn and did not get it: it comes back.
func (s *subscription) giveBack(d Delivery, cause error) {
	if s.pullCtx.Err() != nil {
		s.info.Logger.Info("settle: shutdown while the delivery waited for its turn; delivery abandoned, it comes back",
			"message_id", d.ID(), "attempt", d.Attempt())
	}
	s.fin.Finish(context.WithoutCancel(s.pullCtx), d, Verdict{Action: ActAbandon, Cause: cause}, s.settled)
}

// throttled tells the subscription's rate limits that the downstream refused (Throttled) and
// retries d after the delay the handler was given.
func (s *subscription) throttled(ctx context.Context, d Delivery, te *ThrottledError) Verdict {
	for _, g := range s.gates {
		if g.learn == nil {
			continue
		}
		var key string
		if g.key != nil {
			key = g.key(d)
		}
		if err := g.learn.Backoff(ctx, key, te.After); err != nil {
			s.info.Logger.Warn("settle: telling the rate limit of a throttled downstream failed",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
		}
	}
	s.info.Logger.Warn("settle: downstream throttled the handler; retrying after the limiter's delay",
		"message_id", d.ID(), "attempt", d.Attempt(), "retry_after", te.After, "error", te.Cause)
	return Verdict{Action: ActRetryAfter, Delay: te.After, Cause: te}
}

func asThrottled(err error) (*ThrottledError, bool) {
	var te *ThrottledError
	ok := errors.As(err, &te)
	return te, ok
}
