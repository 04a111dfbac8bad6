package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// PauseStore keeps whether a queue is paused, for every process that consumes it, across
// restarts: the queue's own database (core/limit/sqllimit), or a store the service already has.
// MemoryPauseStore keeps it in this process.
type PauseStore interface {
	// Paused reports whether queue is paused; a queue the store has never heard of is not.
	Paused(ctx context.Context, queue string) (bool, error)
	// SetPaused pauses or resumes queue.
	SetPaused(ctx context.Context, queue string, paused bool) error
}

// DefaultPausePoll is how often a pausable subscription reads its queue's flag: another
// process's Pause or Resume is seen within it (this App's own at once).
const DefaultPausePoll = time.Second

// PauseOption configures Pausable.
type PauseOption func(*pauseState) error

// PausePoll sets how often the subscription reads its queue's pause flag (DefaultPausePoll).
func PausePoll(d time.Duration) PauseOption {
	return func(p *pauseState) error {
		if d <= 0 {
			return fmt.Errorf("PausePoll(%v): the interval must be positive", d)
		}
		p.poll = d
		return nil
	}
}

// Pausable lets the subscription's queue be paused through store (App.Pause, or SetPaused on
// the store from any process or tool). While the queue is paused no new handler starts:
// handlers already running finish and settle, idle workers take no delivery, and a delivery
// taken just before the pause waits, its claim kept valid and no attempt spent (as a delivery
// waiting for a flow-control turn does; see Limiter). Resume continues where it stopped. The
// subscription's health says "paused". Not for batch subscriptions.
func Pausable(store PauseStore, opts ...PauseOption) Option {
	return OptionFunc(func(o *Options) error {
		if store == nil {
			return errors.New("Pausable(nil): no store")
		}
		p := &pauseState{store: store, poll: DefaultPausePoll}
		for _, opt := range opts {
			if opt == nil {
				return errors.New("Pausable: nil option")
			}
			if err := opt(p); err != nil {
				return fmt.Errorf("Pausable: %w", err)
			}
		}
		o.pause = p
		return nil
	})
}

// pauseState is a pausable subscription's view of its queue's flag.
type pauseState struct {
	store PauseStore
	poll  time.Duration

	mu      sync.Mutex
	gen     uint64 // counts this App's own pauses and resumes, so a poll read before one cannot undo it
	paused  bool
	resumed chan struct{} // closed when the pause ends; nil while not paused
	// starting is held shared from a worker's last look at the flag until its handler has
	// returned, and exclusively by a pause: so that once App.Pause returns, no handler of this
	// App runs or starts.
	starting sync.RWMutex
}

// set records the flag and reports whether it changed.
func (p *pauseState) set(paused bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	return p.setLocked(paused)
}

// generation returns the count of this App's own pauses and resumes.
func (p *pauseState) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// setRead records a flag read from the store while the generation was gen; a read older than
// this App's own last pause or resume is dropped. It reports whether the flag changed.
func (p *pauseState) setRead(paused bool, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return false
	}
	return p.setLocked(paused)
}

func (p *pauseState) setLocked(paused bool) bool {
	if p.paused == paused {
		return false
	}
	p.paused = paused
	if paused {
		p.resumed = make(chan struct{})
	} else {
		close(p.resumed)
		p.resumed = nil
	}
	return true
}

func (p *pauseState) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// wait blocks while the queue is paused; false when ctx ended first.
func (p *pauseState) wait(ctx context.Context) bool {
	p.mu.Lock()
	ch := p.resumed
	p.mu.Unlock()
	if ch == nil {
		return ctx.Err() == nil
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// drain waits until no handler of the subscription runs or is about to start (those that
// looked at the flag before it was set).
func (p *pauseState) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		p.starting.Lock()
		p.starting.Unlock() //nolint:staticcheck // an empty critical section: waiting for the shared holders is the point
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readPause reads the queue's flag before the subscription takes anything, so that a queue
// paused before a restart stays paused from the first delivery on.
func (s *subscription) readPause(ctx context.Context) error {
	p := s.opts.pause
	if p == nil {
		return nil
	}
	paused, err := p.store.Paused(ctx, s.queue)
	if err != nil {
		return fmt.Errorf("Pausable: reading the pause flag of queue %q: %w", s.queue, err)
	}
	p.set(paused)
	return nil
}

// watchPause reads the queue's flag every poll until ctx ends, so that a pause or resume from
// another process takes effect here.
func (s *subscription) watchPause(ctx context.Context) {
	p := s.opts.pause
	for {
		if clock.Sleep(ctx, s.app.clock, p.poll) != nil {
			return
		}
		gen := p.generation()
		paused, err := p.store.Paused(ctx, s.queue)
		switch {
		case err != nil && ctx.Err() == nil:
			s.info.Logger.Warn("settle: reading the queue's pause flag failed; keeping the last known state", "error", err, "paused", p.isPaused())
			s.fail(err)
		case err == nil && p.setRead(paused, gen):
			s.info.Logger.Info("settle: queue pause changed by the store", "paused", paused)
		}
	}
}

// ErrNotPausable is returned by App.Pause and App.Resume for a queue none of whose
// subscriptions in the App is Pausable.
var ErrNotPausable = errors.New("no Pausable subscription of the App consumes the queue")

// Pause pauses queue for every process that consumes it: it sets the flag in the stores of the
// App's Pausable subscriptions of the queue, stops them from starting handlers at once, and
// returns once their running handlers have returned (or ctx ends: the pause stays in force).
// Other processes see the pause within their PausePoll.
func (a *App) Pause(ctx context.Context, queue string) error { return a.setPaused(ctx, queue, true) }

// Resume ends a pause of queue for every process that consumes it (see Pause).
func (a *App) Resume(ctx context.Context, queue string) error {
	return a.setPaused(ctx, queue, false)
}

func (a *App) setPaused(ctx context.Context, queue string, paused bool) error {
	a.mu.Lock()
	var ps []*pauseState
	for _, s := range a.subs {
		if s.queue == queue && s.opts.pause != nil {
			ps = append(ps, s.opts.pause)
		}
	}
	a.mu.Unlock()
	verb := "pausing"
	if !paused {
		verb = "resuming"
	}
	if len(ps) == 0 {
		return fmt.Errorf("%s queue %q: %w", verb, queue, ErrNotPausable)
	}
	// This App stops starting handlers at once; the store tells the other processes.
	was := make([]bool, len(ps))
	for i, p := range ps {
		was[i] = p.isPaused()
		p.set(paused)
	}
	stored := map[PauseStore]bool{}
	for _, p := range ps {
		if stored[p.store] {
			continue
		}
		if err := p.store.SetPaused(ctx, queue, paused); err != nil {
			for i, p := range ps {
				p.set(was[i])
			}
			return fmt.Errorf("%s queue %q: %w", verb, queue, err)
		}
		stored[p.store] = true
	}
	if !paused {
		return nil
	}
	for _, p := range ps {
		if err := p.drain(ctx); err != nil {
			return fmt.Errorf("pausing queue %q: the pause is in force, but its running handlers had not returned: %w", queue, err)
		}
	}
	return nil
}

// MemoryPauseStore is a PauseStore in this process's memory.
type MemoryPauseStore struct {
	mu     sync.Mutex
	paused map[string]bool
}

// NewMemoryPauseStore returns a MemoryPauseStore with no queue paused.
func NewMemoryPauseStore() *MemoryPauseStore {
	return &MemoryPauseStore{paused: make(map[string]bool)}
}

// Paused implements PauseStore.
func (m *MemoryPauseStore) Paused(_ context.Context, queue string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused[queue], nil
}

// SetPaused implements PauseStore.
func (m *MemoryPauseStore) SetPaused(_ context.Context, queue string, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[queue] = paused
	return nil
}
