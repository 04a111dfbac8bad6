package engine

import (
	"context"
	"sync"
	"time"
)

// Background returns the context of statements the engine runs on its own behalf (a grouped
// settlement, an extension, an unlock): parent's values without its cancellation, under the
// subscription's statement timeout, so that none of them can block the subscription forever.
func (rt *Runtime) Background(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), rt.Cfg.StmtTimeout)
}

// StmtCtx returns a context for a statement the engine runs per delivery (a settlement, an
// unlock), with a deadline between half the statement timeout and all of it. One context
// serves every statement of that window, so that the per-message path allocates no timer; a
// statement past its deadline is cancelled rather than left to hang. It carries no caller's
// values: these statements belong to the engine.
func (rt *Runtime) StmtCtx() context.Context { return rt.deadlines.ctx() }

// deadlines is the shared deadline context of the statements run per delivery.
type deadlines struct {
	timeout time.Duration

	mu     sync.Mutex
	cur    context.Context
	until  time.Time
	cancel [2]context.CancelFunc // the current context's and the one before it
}

func (s *deadlines) ctx() context.Context {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.until.Sub(now) < s.timeout/2 {
		// The previous context is left to expire by itself (statements still use it); the one
		// before it is past its deadline by now, and released.
		if c := s.cancel[1]; c != nil {
			c()
		}
		var cancel context.CancelFunc
		s.until = now.Add(s.timeout)
		s.cur, cancel = context.WithDeadline(context.Background(), s.until)
		s.cancel = [2]context.CancelFunc{cancel, s.cancel[0]}
	}
	return s.cur
}

// stop releases the statement contexts; the source is closing.
func (s *deadlines) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cancel {
		if c != nil {
			c()
		}
	}
	s.cur, s.cancel = nil, [2]context.CancelFunc{}
}
