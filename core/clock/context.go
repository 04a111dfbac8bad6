package clock

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// WithTimeout returns a copy of parent that is cancelled when d has passed on c, with
// context.DeadlineExceeded as its error, or when parent is done or cancel is called. On the
// real clock it is context.WithTimeout. On any other clock the returned context reports no
// Deadline: drivers turn a context's deadline into socket deadlines on the wall clock, which a
// virtual time must not reach; it is cancelled when the clock passes d.
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx := &timeoutCtx{Context: parent, done: make(chan struct{})}
	if err := parent.Err(); err != nil {
		ctx.end(err)
		return ctx, func() {}
	}
	ctx.mu.Lock()
	ctx.stopParent = context.AfterFunc(parent, func() { ctx.end(parent.Err()) })
	ctx.timer = c.AfterFunc(d, func() { ctx.end(context.DeadlineExceeded) })
	ctx.mu.Unlock()
	return ctx, func() { ctx.end(context.Canceled) }
}

// timeoutCtx is a context cancelled by a timer of a Clock.
type timeoutCtx struct {
	context.Context
	once sync.Once
	done chan struct{}

	mu         sync.Mutex
	err        error
	timer      Timer       // the deadline
	stopParent func() bool // stops watching the parent
}

// end cancels the context with err, once, and disarms whatever could still end it.
func (c *timeoutCtx) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		t, stop := c.timer, c.stopParent
		c.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		if stop != nil {
			stop()
		}
		close(c.done)
	})
}

func (c *timeoutCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *timeoutCtx) Done() <-chan struct{}       { return c.done }
func (c *timeoutCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Jitter spreads a wait: it returns a duration drawn uniformly from [d/2, d], so that replicas
// that failed together (a server restart) do not retry in lockstep. Waiting the full d always
// covers it, which is what tests on a virtual clock advance by.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}
