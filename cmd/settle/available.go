package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/ops"
)

// Reconnection backoff of a console target that is down: 1s, 2s, 4s … at most a minute.
const (
	reopenFirst = time.Second
	reopenLimit = time.Minute
)

// errDown is matched by what a down target's operations return; so is console.ErrUnavailable,
// which the console answers with 503.
var errDown = fmt.Errorf("target is down: %w", console.ErrUnavailable)

// downError is what every operation of a target that could not be opened returns: the reason,
// since when, and when the console tries again.
type downError struct {
	name  string
	since time.Time
	next  time.Time
	err   error
}

func (e *downError) Error() string {
	return fmt.Sprintf("target %s is down since %s (retrying at %s): %v", e.name,
		e.since.UTC().Format("15:04:05Z"), e.next.UTC().Format("15:04:05Z"), e.err)
}

func (e *downError) Unwrap() []error { return []error{errDown, e.err} }

// opener opens a target's ops.Queue (target.open, or a test's).
type opener func(ctx context.Context) (ops.Queue, io.Closer, error)

// available is a console target that stays in the console while its backend is unreachable:
// it opens the target at start, and when that fails, answers every operation with a
// *downError giving the reason while it retries in the background, with a doubling backoff on
// its clock, until the backend answers. It implements ops.Queue.
type available struct {
	name    string
	open    opener
	clk     clock.Clock
	log     *slog.Logger
	changed func() // called after each attempt to open (tests wait on it); may be nil

	mu     sync.Mutex
	q      ops.Queue
	closer io.Closer
	down   *downError
	closed bool
}

// start opens the target once. A mistake in the target (usage errors) is returned: the
// console must not start with it. Any other failure leaves the target down, retried in the
// background until ctx is done.
func (a *available) start(ctx context.Context) error {
	err := a.try(ctx, 0)
	if err == nil || isUsage(err) {
		return err
	}
	go a.retry(ctx)
	return nil
}

// try opens the target once; wait is the backoff after a failure, for the error's "retrying at".
func (a *available) try(ctx context.Context, wait time.Duration) error {
	q, closer, err := a.open(ctx)
	a.mu.Lock()
	now := a.clk.Now()
	if err == nil && a.closed {
		_ = closer.Close() // opened while the console shut down
	} else if err == nil {
		a.q, a.closer, a.down = q, closer, nil
	} else if !isUsage(err) {
		since := now
		if a.down != nil {
			since = a.down.since
		}
		a.down = &downError{name: a.name, since: since, next: now.Add(clock.Backoff(wait, reopenFirst, reopenLimit)), err: err}
	}
	a.mu.Unlock()
	if a.changed != nil {
		a.changed()
	}
	return err
}

func (a *available) retry(ctx context.Context) {
	var wait time.Duration
	for {
		wait = clock.Backoff(wait, reopenFirst, reopenLimit)
		if clock.Sleep(ctx, a.clk, wait) != nil {
			return
		}
		err := a.try(ctx, wait)
		if err == nil {
			a.log.Info("settle console: target is up", "target", a.name)
			return
		}
		if isUsage(err) {
			a.log.Error("settle console: target cannot be opened, no more retries", "target", a.name, "error", err)
			return
		}
		if wait == reopenLimit || wait == reopenFirst {
			// Logged at the first retry and then once per minute at most, not at every attempt.
			a.log.Warn("settle console: target still down", "target", a.name, "error", err, "retry_in", clock.Backoff(wait, reopenFirst, reopenLimit))
		}
	}
}

// Close closes the target's connection when it was opened.
func (a *available) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.closer == nil {
		return nil
	}
	return a.closer.Close()
}

// queue returns the opened queue, or the reason it is down.
func (a *available) queue() (ops.Queue, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.q != nil {
		return a.q, nil
	}
	if a.down != nil {
		d := *a.down
		return nil, &d
	}
	return nil, fmt.Errorf("%w: target %s was never opened", errDown, a.name)
}

func (a *available) Stats(ctx context.Context) (ops.Stats, error) {
	q, err := a.queue()
	if err != nil {
		return ops.Stats{}, err
	}
	return q.Stats(ctx)
}

func (a *available) ListDead(ctx context.Context, f ops.Filter, p ops.Page) (ops.DeadPage, error) {
	q, err := a.queue()
	if err != nil {
		return ops.DeadPage{}, err
	}
	return q.ListDead(ctx, f, p)
}

func (a *available) GetDead(ctx context.Context, id string) (ops.DeadLetter, error) {
	q, err := a.queue()
	if err != nil {
		return ops.DeadLetter{}, err
	}
	return q.GetDead(ctx, id)
}

func (a *available) Redrive(ctx context.Context, s ops.Selection, o ops.RedriveOptions) (int, error) {
	q, err := a.queue()
	if err != nil {
		return 0, err
	}
	return q.Redrive(ctx, s, o)
}

func (a *available) Purge(ctx context.Context, s ops.Selection) (int, error) {
	q, err := a.queue()
	if err != nil {
		return 0, err
	}
	return q.Purge(ctx, s)
}
