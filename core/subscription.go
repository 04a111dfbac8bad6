package core

import (
	"context"
	"errors"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// subscription is one mounted handler at run time: workers that, one at a time, take the next
// delivery from the source when they are free, then handle, resolve and finish it.
type subscription struct {
	name, queue string
	ep          Endpoint
	opts        *Options
	chain       HandlerFunc
	payload     reflect.Type // T of Subscribe[T], for Describe

	app       *App
	info      Subscription
	src       Source
	fin       Finisher
	settled   Settled
	inflight  sync.WaitGroup // handed to a worker, not yet settled
	closeOnce sync.Once

	batch       func() batchCall // a worker's batch, for a batch subscription; nil for single messages
	carry       Delivery         // a suspect delivery taken while filling a batch, to run alone next; guarded by the pull lock
	holdsDelays bool             // the finisher keeps RetryAfter delays durably (DelayHolder)
	replies     []replyRoute     // the publishers declared with Replies; nil for none
	running     atomic.Bool
	settledAt   atomic.Int64 // unix nanoseconds of the last durable settlement, on the App's clock
	lastErr     atomic.Pointer[failure]
	checker     atomic.Pointer[HealthChecker] // the source's health check, when it has one: health reads it while open may replace src
	gates       []gate                        // flow control (Concurrency, Rate); nil for none
	pullCtx     context.Context               // ends when the App stops taking deliveries: a wait for a turn ends with it
}

// failure is a subscription's last error, for its health.
type failure struct {
	err string
	at  time.Time
}

func (s *subscription) open(ctx context.Context, a *App) error {
	s.app = a
	log := a.logger.With("subscription", s.name, "queue", s.queue)
	s.info = Subscription{Name: s.name, Queue: s.queue, Options: s.opts, Logger: log, Clock: a.clock, Report: s.report}
	src, fin, err := s.ep.Open(ctx, s.info)
	if err != nil {
		return err
	}
	if src == nil || fin == nil {
		return errors.New("endpoint returned no source or finisher")
	}
	s.src, s.fin = src, fin
	if hc, ok := src.(HealthChecker); ok {
		s.checker.Store(&hc)
	} else {
		s.checker.Store(nil)
	}
	if err := s.opts.unread(s.ep); err != nil {
		s.closeSource()
		return err
	}
	if (len(s.opts.limits) > 0 || s.opts.pause != nil) && s.batch != nil {
		s.closeSource()
		return errors.New("Concurrency, Rate and Pausable do not apply to a batch subscription yet")
	}
	s.gates = buildGates(s.opts.limits, s.name, a.clock, log)
	if err := s.readPause(ctx); err != nil {
		s.closeSource()
		return err
	}
	s.settled = s.onSettled
	if dh, ok := fin.(DelayHolder); ok {
		s.holdsDelays = dh.HoldsDelays()
	}
	if len(s.opts.Replies) > 0 {
		s.openReplies()
	}
	for _, p := range []Policy{s.opts.OnError, s.opts.OnPanic, s.opts.OnDecodeError} {
		if p.kind == policyBackoff && !s.holdsDelays {
			log.Warn("settle: a Backoff policy on a queue that keeps no delays durably; its failures retry at once (a delay kept in the process would be lost with it)",
				"policy", p.String())
			break
		}
	}
	if s.batch != nil && len(a.middleware) > 0 {
		log.Info("settle: the App's middleware does not wrap a batch handler; its messages' settlements still reach the observers",
			"middleware", len(a.middleware))
	}
	s.running.Store(true)
	log.Info("settle: subscription open", "workers", s.opts.Workers, "dead_letter_after", s.opts.Cap, "dead_letter_to", s.opts.DeadLetterTo)
	return nil
}

func (s *subscription) closeSource() {
	s.closeOnce.Do(func() {
		if s.src != nil {
			if err := s.src.Close(); err != nil {
				s.info.Logger.Error("settle: closing source", "error", err)
			}
		}
	})
}

// run works until pullCtx is done, then waits for its workers and for every settlement. Each
// worker takes its own next delivery from the source (one Next call at a time, under pull) and
// handles it: no hand-off between goroutines on the way from the source to the handler, and
// Next is still called only when a worker is free to take the delivery.
func (s *subscription) run(pullCtx, workCtx context.Context) {
	defer s.running.Store(false)
	s.pullCtx = pullCtx
	if s.opts.pause != nil {
		var watch sync.WaitGroup
		watch.Go(func() { s.watchPause(pullCtx) })
		defer watch.Wait()
	}
	workCtx = context.WithValue(workCtx, subscriptionKey{}, &s.info) // for SubscriptionFrom
	var pull sync.Mutex
	backoff := time.Duration(0) // guarded by pull
	// alone isolates suspect deliveries: a worker holds it shared while it handles a delivery,
	// and exclusively while it handles a suspect one, so that a message that may have killed
	// the process runs with nothing else of the subscription beside it (a crash then charges
	// an attempt to it alone). One worker needs no lock.
	//
	// A worker takes its hold on alone before it lets go of the pull lock, so deliveries run in
	// the order they were taken: a suspect delivery waits for the ones taken before it to
	// finish, and no worker takes another delivery while it waits (one taken then would wait
	// anyway, held in flight beside a message that may crash the process).
	var alone sync.RWMutex
	isolate := s.opts.Workers > 1
	var workers sync.WaitGroup
	for range s.opts.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if s.batch != nil {
				s.batchWorker(pullCtx, workCtx, &pull, &alone, &backoff, isolate)
				return
			}
			for {
				pull.Lock()
				d, ok := s.next(pullCtx, &backoff)
				if !ok {
					pull.Unlock()
					return
				}
				switch {
				case !isolate:
					pull.Unlock()
					s.process(workCtx, d)
				case isSuspect(d):
					alone.Lock()
					pull.Unlock()
					s.process(workCtx, d)
					alone.Unlock()
				default:
					alone.RLock()
					pull.Unlock()
					s.process(workCtx, d)
					alone.RUnlock()
				}
			}
		}()
	}
	workers.Wait()
	s.inflight.Wait()
}

// next takes the next delivery from the source, retrying after a backoff on errors; false when
// pullCtx is done. The caller holds the pull lock.
func (s *subscription) next(pullCtx context.Context, backoff *time.Duration) (Delivery, bool) {
	for pullCtx.Err() == nil {
		if p := s.opts.pause; p != nil && !p.wait(pullCtx) {
			break // an idle worker of a paused queue takes nothing
		}
		d, err := s.src.Next(pullCtx)
		if err != nil {
			if pullCtx.Err() != nil {
				break
			}
			*backoff = clock.Backoff(*backoff, 100*time.Millisecond, 5*time.Second)
			wait := clock.Jitter(*backoff)
			s.info.Logger.Error("settle: taking the next delivery failed; trying again", "error", err, "backoff", wait)
			s.fail(err)
			s.report(Event{Kind: EventSourceFailed, Err: err})
			_ = clock.Sleep(pullCtx, s.app.clock, wait)
			continue
		}
		*backoff = 0
		s.inflight.Add(1)
		return d, true
	}
	return nil, false
}

// Suspect is implemented by a delivery that can tell whether its message's previous delivery
// may have ended without a settlement: a lease that lapsed, a message the broker redelivered
// after a connection or process went away. Core handles a suspect delivery with no other handler
// of its subscription running, so that if it is the message that kills the process, the crash
// charges an attempt to it alone and the cap ends its loop without taking its neighbours along.
// A batch subscription hands it to its handler alone, in a batch of one.
type Suspect interface {
	Suspect() bool
}

// Charger is implemented by a delivery whose attempt is counted when its handler starts
// rather than when the backend took it (a SQL row rescued after its lease lapsed: a process
// that dies before the handler then charges it nothing). Core calls Charge right before the
// handler, once the delivery's turn has come (a suspect delivery runs with no other handler
// of its subscription, and may wait for that), and before a delivery past the cap is moved to
// its dead letter, so that the row's count says the same as the dead letter's.
// When Charge fails the handler is not called and the delivery is abandoned: it comes back,
// uncounted. A delivery with nothing to count returns nil at once.
type Charger interface {
	Charge(ctx context.Context) error
}

func isSuspect(d Delivery) bool {
	sd, ok := d.(Suspect)
	return ok && sd.Suspect()
}

// DeliveryContext is implemented by a delivery that gives its handler a context of its own,
// e.g. one carrying the delivery's transaction for sqlqueue.Tx.
type DeliveryContext interface {
	HandlerContext(ctx context.Context) context.Context
}

func (s *subscription) process(ctx context.Context, d Delivery) {
	var release func() // the turns of flow control, given back once the handler returns
	if len(s.gates) > 0 || s.opts.pause != nil {
		var ok bool
		if release, ok = s.enter(d); !ok {
			return
		}
	}
	if !s.admit(ctx, d) {
		if release != nil {
			release()
		}
		return
	}
	hctx, stopTimeout := s.withTimeout(ctx, d, 1)
	var rb *replyBuffer
	if len(s.replies) > 0 {
		rb = &replyBuffer{s: s, d: d}
		hctx = context.WithValue(hctx, replyKey{}, rb)
	}
	if dc, ok := d.(DeliveryContext); ok {
		hctx = dc.HandlerContext(hctx)
	}
	err := s.call(hctx, d)
	stopTimeout() // the handler has returned: it cannot overrun any more
	if release != nil {
		release()
	}
	v := s.verdict(ctx, d, err)
	if rb != nil {
		v = s.withReplies(ctx, d, rb, v)
	}
	s.fin.Finish(ctx, d, v, s.settled)
}

// admit charges d's attempt (Charger) and checks it against the cap; false when d was settled
// (abandoned, or moved to its dead letter) instead of being handed to its handler.
func (s *subscription) admit(ctx context.Context, d Delivery) bool {
	if c, ok := d.(Charger); ok {
		if err := c.Charge(ctx); err != nil {
			s.info.Logger.Warn("settle: counting the attempt of a delivery failed; giving the delivery back without calling the handler",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
			s.fin.Finish(ctx, d, Verdict{Action: ActAbandon, Cause: err}, s.settled)
			return false
		}
	}
	if cap := s.opts.Cap; cap > 0 && d.Attempt() > cap {
		// None of its earlier deliveries settled: calling the handler again would let a
		// message that kills the process, or hangs past its lease, loop forever.
		v := notSettled(d.Attempt(), cap, s.opts.DeadLetterTo)
		s.info.Logger.Warn("settle: delivered past the cap without ever settling; moving to dead letter without calling the handler",
			"message_id", d.ID(), "attempt", d.Attempt(), "cap", cap, "dead_letter_to", v.Dest)
		s.fin.Finish(ctx, d, v, s.settled)
		return false
	}
	return true
}

// withTimeout gives a handler call its Timeout, if the subscription has one, and arms the
// report of a handler that overruns it; d is the delivery (the first of a batch of n) named in
// the report. The returned function ends both once the handler has returned.
func (s *subscription) withTimeout(ctx context.Context, d Delivery, n int) (context.Context, func()) {
	t := s.opts.Timeout
	if t <= 0 {
		return ctx, func() {}
	}
	hctx, cancel := clock.WithTimeout(ctx, s.app.clock, t)
	overran := s.app.clock.AfterFunc(t+TimeoutGrace(t), func() {
		if n > 1 {
			s.info.Logger.Warn("settle: batch handler still running after its timeout and grace; it ignores its context",
				"message_id", d.ID(), "attempt", d.Attempt(), "batch", n, "timeout", t)
		} else {
			s.info.Logger.Warn("settle: handler still running after its timeout and grace; it ignores its context",
				"message_id", d.ID(), "attempt", d.Attempt(), "timeout", t)
		}
		s.report(Event{Kind: EventHandlerOverran, MessageID: d.ID(), Attempt: d.Attempt(), Err: context.DeadlineExceeded})
	})
	return hctx, func() { overran.Stop(); cancel() }
}

func (s *subscription) call(ctx context.Context, d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return s.chain(ctx, d)
}

// verdict turns the handler's return value into a resolved verdict.
func (s *subscription) verdict(ctx context.Context, d Delivery, err error) Verdict {
	if err == nil {
		return Verdict{Action: ActAck}
	}
	var v Verdict
	if te, ok := asThrottled(err); ok {
		v = s.throttled(ctx, d, te)
	} else if o, ok := AsOutcome(err); ok {
		switch o.kind {
		case OutcomeDrop:
			v = Verdict{Action: ActDrop, Cause: o.cause}
		case OutcomeRetry:
			v = Verdict{Action: ActRetry, Cause: o.cause}
		default:
			v = Verdict{Action: ActRetryAfter, Delay: o.delay, Cause: o.cause}
		}
	} else {
		var de *DecodeError
		var pe *PanicError
		switch {
		case errors.As(err, &de):
			v = s.policy(s.opts.OnDecodeError, d, err)
			s.info.Logger.Warn("settle: payload does not decode",
				"message_id", d.ID(), "attempt", d.Attempt(), "size", de.Size, "error", de.Err, "policy", v.String())
		case errors.As(err, &pe):
			v = s.policy(s.opts.OnPanic, d, err)
			s.info.Logger.Error("settle: handler panicked",
				"message_id", d.ID(), "attempt", d.Attempt(), "panic", pe.Value, "policy", v.String(), "stack", string(pe.Stack))
		case ctx.Err() != nil:
			s.info.Logger.Warn("settle: handler stopped by shutdown; delivery abandoned, it comes back",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err)
			return Verdict{Action: ActAbandon, Cause: err}
		default:
			v = s.policy(s.opts.OnError, d, err)
			s.info.Logger.Warn("settle: handler failed",
				"message_id", d.ID(), "attempt", d.Attempt(), "error", err, "policy", v.String())
		}
	}
	return s.resolve(d, v)
}

// resolve applies the cap to v (Resolve), logging a move to the dead letter.
func (s *subscription) resolve(d Delivery, v Verdict) Verdict {
	r := Resolve(v, d.Attempt(), s.opts.Cap, s.opts.DeadLetterTo)
	if r.Action == ActDeadLetter {
		s.info.Logger.Warn("settle: moving message to dead letter",
			"message_id", d.ID(), "attempt", d.Attempt(), "dead_letter_to", r.Dest, "cap", s.opts.Cap, "asked", v.String(), "reason", Reason(r))
	}
	return r
}

func (s *subscription) policy(p Policy, d Delivery, cause error) Verdict {
	switch p.kind {
	case policyDrop:
		return Verdict{Action: ActDrop, Cause: cause}
	case policyDeadLetter:
		if s.opts.Cap > 0 {
			return Verdict{Action: ActDeadLetter, Dest: s.opts.DeadLetterTo, Cause: cause}
		}
		return Verdict{Action: ActDrop, Cause: cause}
	case policyBackoff:
		if s.holdsDelays {
			return Verdict{Action: ActRetryAfter, Delay: p.delay(d.Attempt()), Cause: cause}
		}
	}
	return Verdict{Action: ActRetry, Cause: cause}
}

func (s *subscription) onSettled(d Delivery, v Verdict, err error) {
	// One clock read serves the health's last settlement and the observers' Settlement.At.
	var now time.Time
	if err != nil {
		kind := EventSettlementFailed
		if errors.Is(err, ErrSettlementUnknown) {
			kind = EventSettlementUnknown
			s.info.Logger.Warn("settle: settlement unknown; it was sent but not confirmed: the message is gone if the server applied it, and returns as an abandoned one if not",
				"message_id", d.ID(), "attempt", d.Attempt(), "verdict", v.String(), "error", err)
		} else {
			s.info.Logger.Warn("settle: settlement failed; the message returns as an abandoned one",
				"message_id", d.ID(), "attempt", d.Attempt(), "verdict", v.String(), "error", err)
		}
		s.fail(err)
		s.report(Event{Kind: kind, MessageID: d.ID(), Attempt: d.Attempt(), Err: err})
	} else {
		now = s.app.clock.Now()
		s.settledAt.Store(now.UnixNano())
	}
	if len(s.app.observers)+len(s.opts.Observers) > 0 {
		if now.IsZero() {
			now = s.app.clock.Now()
		}
		st := Settlement{Subscription: s.name, Queue: s.queue, Delivery: d, Verdict: v, Err: err, At: now}
		for _, o := range s.opts.Observers { // the subscription's own hooks complete the settlement
			o(st)
		}
		for _, o := range s.app.observers {
			o(st)
		}
	}
	s.inflight.Done()
}

// report tells the App of an event of this subscription.
func (s *subscription) report(e Event) {
	e.Subscription, e.Queue = s.name, s.queue
	s.app.report(e)
}

// fail records the subscription's last error, for its health.
func (s *subscription) fail(err error) {
	s.lastErr.Store(&failure{err: err.Error(), at: s.app.clock.Now()})
}

// health reports the subscription's state; its source's own check (a PostgreSQL listener)
// when the source has one.
func (s *subscription) health(ctx context.Context, app appState) ComponentHealth {
	c := ComponentHealth{Name: s.name, Status: HealthPass, State: "running"}
	switch {
	case s.running.Load():
	case app == appStarting || app == appNew:
		c.Status, c.State = HealthFail, "starting"
	default:
		c.Status, c.State = HealthFail, "stopped"
	}
	if p := s.opts.pause; p != nil && s.running.Load() && p.isPaused() {
		c.State = "paused"
	}
	if f := s.lastErr.Load(); f != nil {
		c.Output, c.ErrorAt = f.err, f.at
	}
	if n := s.settledAt.Load(); n != 0 {
		c.SettledAt = time.Unix(0, n).UTC()
	}
	if hc := s.checker.Load(); hc != nil && s.running.Load() {
		src := (*hc).CheckHealth(ctx)
		c.Status = worse(c.Status, src.Status)
		if src.State != "" {
			c.State += ", " + src.State
		}
		if src.Output != "" {
			c.Output, c.ErrorAt = src.Output, src.ErrorAt
		}
	}
	return c
}
