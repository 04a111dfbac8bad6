package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Tick is one occurrence of a job, given to the function that builds its message.
type Tick struct {
	// Schedule is the job's name.
	Schedule string
	// At is the tick's time, in the schedule's time zone.
	At time.Time
	// ID is TickID(Schedule, At): the message's id.
	ID string
}

// Option configures a Scheduler.
type Option func(*Scheduler) error

// WithClock sets the clock the scheduler waits on (default: real). Give it the App's clock.
func WithClock(c clock.Clock) Option {
	return func(s *Scheduler) error {
		if c == nil {
			return errors.New("periodic.WithClock(nil): no clock")
		}
		s.clock = c
		return nil
	}
}

// WithLogger sets the scheduler's logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(s *Scheduler) error {
		if l == nil {
			return errors.New("periodic.WithLogger(nil): no logger")
		}
		s.log = l
		return nil
	}
}

// Retain keeps the claims of the last d of ticks, for a Claimer that keeps them (Pruner): the
// scheduler prunes older ones every hour. Default 24 hours. Keep it longer than any CatchUpLast
// window, or a restart may publish a tick again whose claim is gone.
func Retain(d time.Duration) Option {
	return func(s *Scheduler) error {
		if d < time.Minute {
			return fmt.Errorf("periodic.Retain(%v): keep claims for a minute at least", d)
		}
		s.retain = d
		return nil
	}
}

// Scheduler publishes the messages of periodic jobs, one per tick across every process that
// runs the same jobs with claims on the same backend. Register it with the App (it is a
// core.Backend and core.Starter): it starts with the App and stops with it.
type Scheduler struct {
	claims Claimer
	clock  clock.Clock
	log    *slog.Logger
	retain time.Duration

	mu      sync.Mutex
	jobs    []*job
	started bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

var (
	_ core.Backend = (*Scheduler)(nil)
	_ core.Starter = (*Scheduler)(nil)
)

// New returns a Scheduler whose ticks claims decides: SQLClaims on the service's database,
// TargetDedup for a target that deduplicates by itself.
func New(claims Claimer, opts ...Option) (*Scheduler, error) {
	if claims == nil {
		return nil, errors.New("periodic.New: no Claimer (periodic.NewSQLClaims, or periodic.TargetDedup for a target that deduplicates)")
	}
	s := &Scheduler{claims: claims, clock: clock.Real(), log: slog.New(slog.DiscardHandler), retain: 24 * time.Hour}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("periodic.New: option %d is nil", i)
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// JobOption configures one job.
type JobOption func(*job) error

// CatchUpLast publishes, when the scheduler starts, the job's latest tick before that start if
// it is no older than within and no process claimed it (every process was down at the time):
// an outage costs at most the ticks before the last one. Without it (the default) missed
// ticks are skipped and the job resumes at its next tick. The same holds when a running
// scheduler finds several ticks due at once (its process was suspended): it publishes the
// latest of them, and the others are missed unless another process claimed them.
func CatchUpLast(within time.Duration) JobOption {
	return func(j *job) error {
		if within <= 0 {
			return fmt.Errorf("periodic.CatchUpLast(%v): the window must be positive", within)
		}
		j.catchUp = within
		return nil
	}
}

// Dedup publishes each tick with core.DedupKey(TickID) too, for a target that deduplicates:
// a second publish of a tick (a process that died after its publish and before its claim was
// final) is then dropped by the target. TargetDedup implies it.
func Dedup() JobOption {
	return func(j *job) error {
		j.dedup = true
		return nil
	}
}

// PublishWith adds publish options to every message of the job (headers, an ordering key). The
// message id and dedup key are the scheduler's: its core.MessageID (and core.DedupKey) come
// after these and take their place.
func PublishWith(opts ...core.PublishOption) JobOption {
	return func(j *job) error {
		var po core.PublishOptions
		if err := po.Apply(opts...); err != nil {
			return fmt.Errorf("periodic.PublishWith: %w", err)
		}
		j.opts = append(j.opts, opts...)
		return nil
	}
}

// job is one periodic job.
type job struct {
	name    string
	sched   Schedule
	publish func(ctx context.Context, t Tick, opts []core.PublishOption) error
	catchUp time.Duration
	dedup   bool
	opts    []core.PublishOption

	mu        sync.Mutex
	last      time.Time // the latest tick handled here (published here or by another process)
	next      time.Time
	published int64
	lastErr   string
}

// Add adds the job name to s: at every tick of sched, build makes the message and pub
// publishes it with core.MessageID(TickID(name, tick)), from exactly one process. Add before
// the App runs. name identifies the job across processes; it must be the same in each.
func Add[T any](s *Scheduler, name string, sched Schedule, pub *core.Publisher[T], build func(ctx context.Context, t Tick) (T, error), opts ...JobOption) error {
	switch {
	case strings.TrimSpace(name) == "" || len(name) > 100 || !utf8.ValidString(name):
		return fmt.Errorf("periodic.Add(%q): a job name is 1 to 100 bytes of UTF-8", name)
	case sched == nil, pub == nil, build == nil:
		return fmt.Errorf("periodic.Add(%q): a schedule, a publisher and a build function are required", name)
	}
	j := &job{name: name, sched: sched}
	if s.claims == TargetDedup {
		j.dedup = true
	}
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("periodic.Add(%q): option %d is nil", name, i)
		}
		if err := o(j); err != nil {
			return fmt.Errorf("periodic.Add(%q): %w", name, err)
		}
	}
	j.publish = func(ctx context.Context, t Tick, opts []core.PublishOption) error {
		v, err := build(ctx, t)
		if err != nil {
			return fmt.Errorf("building the message: %w", err)
		}
		_, err = pub.Publish(ctx, v, opts...)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("periodic.Add(%q): the scheduler is running; add jobs before the App runs", name)
	}
	if slices.ContainsFunc(s.jobs, func(o *job) bool { return o.name == name }) {
		return fmt.Errorf("periodic.Add(%q): a job of that name exists", name)
	}
	s.jobs = append(s.jobs, j)
	return nil
}

// Status is a job as this process sees it, for consoles and command lines.
type Status struct {
	// Name is the job's name; Schedule describes its schedule.
	Name, Schedule string
	// Last is the latest tick handled by this process, published by it or by another one
	// (zero before the first); Next is the next tick (zero when the schedule has none left).
	Last, Next time.Time
	// Published counts the ticks this process published.
	Published int64
	// LastError is the last failure to claim or publish a tick, "" when none.
	LastError string
}

// Schedules returns the status of every job, in the order they were added.
func (s *Scheduler) Schedules() []Status {
	s.mu.Lock()
	jobs := slices.Clone(s.jobs)
	s.mu.Unlock()
	out := make([]Status, 0, len(jobs))
	for _, j := range jobs {
		j.mu.Lock()
		next := j.next
		if next.IsZero() && !s.running() {
			next = j.sched.Next(s.clock.Now())
		}
		out = append(out, Status{Name: j.name, Schedule: j.sched.String(), Last: j.last, Next: next,
			Published: j.published, LastError: j.lastErr})
		j.mu.Unlock()
	}
	return out
}

func (s *Scheduler) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop != nil
}

// Checker is an optional interface of a Claimer with something to check at start (a table).
type Checker interface {
	Check(ctx context.Context) error
}

// Start checks the claims' backend and starts every job.
func (s *Scheduler) Start(ctx context.Context) error {
	if c, ok := s.claims.(Checker); ok {
		if err := c.Check(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return errors.New("periodic: the scheduler is running already")
	}
	rctx, stop := context.WithCancel(context.Background())
	s.stop, s.started = stop, true
	for _, j := range s.jobs {
		s.wg.Go(func() { s.run(rctx, j) })
	}
	if p, ok := s.claims.(Pruner); ok {
		s.wg.Go(func() { s.prune(rctx, p) })
	}
	return nil
}

// Close stops every job, waiting for a tick being published.
func (s *Scheduler) Close() error {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.wg.Wait()
	}
	return nil
}
