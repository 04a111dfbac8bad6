package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// ErrClosed is returned by Run on an App that has already run, and by backends used after Close.
var ErrClosed = errors.New("settle: closed")

// App is a message-processing service: backends, and subscriptions that mount typed handlers on
// their queues. Run starts everything and stops it in order.
type App struct {
	logger          *slog.Logger
	clock           clock.Clock
	shutdownTimeout time.Duration
	signals         bool
	observers       []Observer
	events          []EventObserver
	propagator      Propagator
	middleware      []Middleware
	info            AppInfo // WithInfo, WithDescription: see describe.go

	ready chan struct{} // closed once Run has opened every subscription

	mu       sync.Mutex
	backends []Backend
	subs     []*subscription
	// publishers are the publishers declared with Publishes, for Describe.
	publishers []Replier
	names      map[string]bool
	ran        bool
	state      appState
}

// AppOption configures an App.
type AppOption func(*App)

// WithLogger sets the App's logger (default: text to stderr at Info).
func WithLogger(l *slog.Logger) AppOption { return func(a *App) { a.logger = l } }

// WithClock sets the clock every backend and subscription of the App uses (default: real).
func WithClock(c clock.Clock) AppOption { return func(a *App) { a.clock = c } }

// WithShutdownTimeout bounds each stage of stopping (default 30 s): how long Run waits for
// in-flight handlers, then for handlers whose context it cancelled, then for sources and
// backends to close. Deliveries of handlers still running are abandoned and come back.
func WithShutdownTimeout(d time.Duration) AppOption {
	return func(a *App) { a.shutdownTimeout = d }
}

// WithObserver adds an observer of every settlement.
func WithObserver(o Observer) AppOption { return func(a *App) { a.observers = append(a.observers, o) } }

// WithMiddleware wraps the handler of every subscription of the App in mw, outermost first and
// outside each subscription's own middleware (core.Use): instrumentation that applies to a whole
// service (tracing) is given once.
func WithMiddleware(mw ...Middleware) AppOption {
	return func(a *App) { a.middleware = append(a.middleware, mw...) }
}

// WithoutSignals stops Run from ending on SIGINT and SIGTERM; it then ends only with its context.
func WithoutSignals() AppOption { return func(a *App) { a.signals = false } }

// New returns an App.
func New(opts ...AppOption) *App {
	a := &App{
		logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		clock:           clock.Real(),
		shutdownTimeout: 30 * time.Second,
		signals:         true,
		names:           make(map[string]bool),
		ready:           make(chan struct{}),
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Logger returns the App's logger.
func (a *App) Logger() *slog.Logger { return a.logger }

// Clock returns the App's clock.
func (a *App) Clock() clock.Clock { return a.clock }

// Ready is closed once Run has started every backend and opened every subscription: from then
// on messages published to the subscriptions' queues are taken. It stays open when start-up fails.
func (a *App) Ready() <-chan struct{} { return a.ready }

// Register adds a backend. Run starts backends in registration order (those that implement
// Starter) before opening subscriptions, and closes them in reverse order after the
// subscriptions have stopped.
func (a *App) Register(b Backend) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.backends = append(a.backends, b)
}

// Subscribe mounts h on the queue ep with the given options. It fails, naming the problem, for a
// nil handler or endpoint, an invalid option, or a subscription name already in use; problems
// that need the backend (a missing table or queue) are reported by Run.
func Subscribe[T any](a *App, ep Endpoint, h Handler[T], opts ...Option) error {
	if ep == nil {
		return errors.New("settle: Subscribe: nil endpoint")
	}
	if h == nil {
		return fmt.Errorf("settle: Subscribe on %q: nil handler", ep.Queue())
	}
	o, err := buildOptions(opts)
	if err != nil {
		return fmt.Errorf("settle: Subscribe on %q: %w", ep.Queue(), err)
	}
	if len(o.batchOpts) > 0 {
		return fmt.Errorf("settle: Subscribe on %q: %s applies to batch subscriptions only (SubscribeBatch)", ep.Queue(), o.batchOpts[0])
	}
	codec := o.Codec
	inner := func(ctx context.Context, d Delivery) error {
		m := &Message[T]{d: d}
		body := d.Body()
		if err := codec.Unmarshal(body, &m.Payload); err != nil {
			return &DecodeError{Size: len(body), Err: err}
		}
		return h(ctx, m)
	}
	chain := HandlerFunc(inner)
	for i := len(o.Middleware) - 1; i >= 0; i-- {
		chain = o.Middleware[i](chain)
	}
	for i := len(a.middleware) - 1; i >= 0; i-- {
		if a.middleware[i] == nil {
			return fmt.Errorf("settle: Subscribe on %q: the App's middleware %d is nil", ep.Queue(), i)
		}
		chain = a.middleware[i](chain)
	}
	return a.add(ep, o, &subscription{chain: chain, payload: reflect.TypeFor[T]()})
}

// add registers s, a subscription to ep with options o, under its unique name.
func (a *App) add(ep Endpoint, o *Options, s *subscription) error {
	name := o.Name
	if name == "" {
		name = ep.Queue()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ran {
		return fmt.Errorf("settle: Subscribe %q: the App has already run", name)
	}
	if a.names[name] {
		return fmt.Errorf("settle: Subscribe: subscription name %q is already in use (give one of them core.Name)", name)
	}
	a.names[name] = true
	s.name, s.queue, s.ep, s.opts = name, ep.Queue(), ep, o
	a.subs = append(a.subs, s)
	return nil
}

// Run starts the backends, opens every subscription and processes messages until ctx is done or
// the process receives SIGINT or SIGTERM. It then stops taking messages, waits up to the
// shutdown timeout for in-flight handlers and their settlements, closes the subscriptions'
// sources and the backends in reverse order, and returns nil. A start-up failure is returned
// with the backend or subscription it concerns; whatever had started is closed again. A stop
// requested while Run is still starting (ctx done) closes what had started and returns nil.
func (a *App) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return ErrClosed
	}
	a.ran = true
	a.state = appStarting
	subs, backends := a.subs, a.backends
	a.mu.Unlock()
	defer a.setState(appStopped)

	if a.signals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	if a.propagator != nil {
		ctx = ContextWithPropagator(ctx, a.propagator)
	}

	var started []Backend
	closeBackends := func() {
		for i := len(started) - 1; i >= 0; i-- {
			if err := started[i].Close(); err != nil {
				a.logger.Error("closing backend", "backend", fmt.Sprintf("%T", started[i]), "error", err)
			}
		}
	}
	// stoppedEarly: a start-up step failed because Run was told to stop while starting; that is
	// a stop, not a failure.
	stoppedEarly := func(err error) bool {
		if ctx.Err() == nil {
			return false
		}
		a.logger.Info("settle: stopped while starting", "cause", err)
		return true
	}
	for _, b := range backends {
		if s, ok := b.(Starter); ok {
			if err := s.Start(ctx); err != nil {
				closeBackends()
				if stoppedEarly(err) {
					return nil
				}
				return fmt.Errorf("settle: start backend %T: %w", b, err)
			}
		}
		started = append(started, b)
	}

	for i, s := range subs {
		if err := s.open(ctx, a); err != nil {
			for _, o := range subs[:i] {
				o.closeSource()
			}
			closeBackends()
			if stoppedEarly(err) {
				return nil
			}
			return fmt.Errorf("settle: subscription %q on %s: %w", s.name, s.queue, err)
		}
	}

	// Handlers and settlements keep the caller's values (loggers, trace context) but not its
	// cancellation: stopping is ordered below.
	base := context.WithoutCancel(ctx)
	pullCtx, stopPulling := context.WithCancel(base)
	workCtx, cancelWork := context.WithCancel(base)
	defer cancelWork()
	var running sync.WaitGroup
	for _, s := range subs {
		running.Add(1)
		go func() {
			defer running.Done()
			s.run(pullCtx, workCtx)
		}()
	}
	a.logger.Info("settle: running", "subscriptions", len(subs))
	a.setState(appRunning)
	close(a.ready)

	<-ctx.Done()
	a.setState(appStopping)
	a.logger.Info("settle: stopping", "cause", context.Cause(ctx))
	stopPulling()
	drained := make(chan struct{})
	go func() {
		running.Wait()
		close(drained)
	}()
	if !a.waitOrTimeout(drained) {
		a.logger.Warn("settle: shutdown timeout: cancelling handlers still running; their deliveries are abandoned and come back",
			"timeout", a.shutdownTimeout)
		cancelWork()
		if !a.waitOrTimeout(drained) {
			a.logger.Error("settle: handlers ignored cancellation; closing backends under them (their messages return by rollback, lease or requeue)")
		}
	}
	closed := make(chan struct{})
	go func() {
		for _, s := range subs {
			s.closeSource()
		}
		closeBackends()
		close(closed)
	}()
	if !a.waitOrTimeout(closed) {
		a.logger.Error("settle: closing sources and backends did not finish within the shutdown timeout; returning without them (unsettled messages return by rollback, lease or requeue)",
			"timeout", a.shutdownTimeout)
		return nil
	}
	a.logger.Info("settle: stopped")
	return nil
}

func (a *App) setState(s appState) {
	a.mu.Lock()
	a.state = s
	a.mu.Unlock()
}

// report tells the App's event observers of e.
func (a *App) report(e Event) {
	if e.At.IsZero() {
		e.At = a.clock.Now()
	}
	for _, o := range a.events {
		o(e)
	}
}

func (a *App) waitOrTimeout(done <-chan struct{}) bool {
	t := a.clock.NewTimer(a.shutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C():
		return false
	}
}
