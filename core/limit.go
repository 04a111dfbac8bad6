package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// Flow control: a subscription mounted with Concurrency or Rate asks a Limiter for its turn
// before each handler call.
//
// A delivery waits for its turn after its backend handed it out and before its attempt is
// counted: its claim stays valid while it waits (the SQL lease form extends the lease of every
// delivery it handed out, the row-lock form keeps its transaction, RabbitMQ and NATS keep the
// message unacknowledged), and a SQL row rescued after a lapsed lease is charged its attempt
// only once the turn has come (Charger). Waiting therefore never spends an attempt. When the
// App shuts down while a delivery waits, the delivery is abandoned: it comes back, uncounted on
// the backends that count at the handler's start.

// Limiter gives a handler its turn. Acquire blocks until the handler of a message with the
// given key may start, or ctx is done (then it returns ctx.Err()); release, called once the
// handler has returned, gives the turn back (a rate limiter's release does nothing). Any
// other error is the limiter's store failing: core logs it and gives the delivery back.
type Limiter interface {
	Acquire(ctx context.Context, key string) (release func(), err error)
}

// LimitLearner is implemented by a Limiter that learns from a downstream that answered "too
// many requests" (a handler returning Throttled): no turn for key is given before d has passed.
type LimitLearner interface {
	Backoff(ctx context.Context, key string, d time.Duration) error
}

// LimitStore keeps the shared state of flow control, so that every process subscribed to a
// queue obeys one limit: the queue's own database (core/limit/sqllimit), or a store the
// service already has (Redis, NATS KV). Times are the callers' (the App's clock), so a store
// computes nothing from its own clock. Every method is one round trip, which is what makes a
// custom store about a hundred lines.
type LimitStore interface {
	// AcquireSlot takes one of the n slots of key for holder until now+lease, and reports
	// whether it got one: a slot whose lease ended before now is free, whoever held it.
	AcquireSlot(ctx context.Context, key string, n int, holder string, now time.Time, lease time.Duration) (bool, error)
	// RenewSlot extends holder's slot of key to now+lease.
	RenewSlot(ctx context.Context, key, holder string, now time.Time, lease time.Duration) error
	// ReleaseSlot frees holder's slot of key.
	ReleaseSlot(ctx context.Context, key, holder string) error
	// TakeToken applies the generic cell rate algorithm (GCRA) to key: one token every
	// interval, burst at once. It returns 0 when a token was taken, or how long after now the
	// next one will be available (nothing is stored then).
	TakeToken(ctx context.Context, key string, now time.Time, interval time.Duration, burst int) (time.Duration, error)
	// Backoff gives key no token before until: the key's theoretical arrival time becomes at
	// least until + (burst-1)·interval, so that one token is available at until and the rest
	// come at the rate (no burst right after a downstream refused).
	Backoff(ctx context.Context, key string, until time.Time, interval time.Duration, burst int) error
}

// DefaultSlotLease is how long a concurrency slot is held without renewal: a process killed
// while it holds a slot keeps it at most this long. Slots are renewed at half the lease while
// their handler runs.
const DefaultSlotLease = 30 * time.Second

// DefaultSlotPoll is how often a delivery waiting for a concurrency slot asks the store again.
const DefaultSlotPoll = 50 * time.Millisecond

// LimitOption configures Concurrency or Rate.
type LimitOption func(*limitSpec) error

// SharedIn keeps the limit's state in store, shared with every process that uses the same
// store and subscription name. Without it the limit holds for this subscription in this
// process only.
func SharedIn(store LimitStore) LimitOption {
	return func(l *limitSpec) error {
		if store == nil {
			return errors.New("SharedIn(nil): no store")
		}
		l.store = store
		return nil
	}
}

// PerKey applies the limit to each key separately: key returns the key of a delivery (e.g.
// OrderingKeyOf, or a customer id from a header). An empty key is a key of its own.
func PerKey(key func(Delivery) string) LimitOption {
	return func(l *limitSpec) error {
		if key == nil {
			return errors.New("PerKey(nil): no key function")
		}
		l.key = key
		return nil
	}
}

// LimitScope names the limit in its store (default: the subscription's name): subscriptions
// with the same scope and store share one limit, whatever their names and Apps.
func LimitScope(name string) LimitOption {
	return func(l *limitSpec) error {
		if name == "" {
			return errors.New("LimitScope(\"\"): the scope is empty")
		}
		l.scope = name
		return nil
	}
}

// SlotLease sets how long a concurrency slot is held without renewal (DefaultSlotLease).
func SlotLease(d time.Duration) LimitOption {
	return func(l *limitSpec) error {
		if d < time.Second {
			return fmt.Errorf("SlotLease(%v): the lease must be at least a second", d)
		}
		l.lease = d
		return nil
	}
}

// SlotPoll sets how often a waiting delivery asks for a concurrency slot (DefaultSlotPoll).
func SlotPoll(d time.Duration) LimitOption {
	return func(l *limitSpec) error {
		if d <= 0 {
			return fmt.Errorf("SlotPoll(%v): the interval must be positive", d)
		}
		l.poll = d
		return nil
	}
}

// limitSpec is a Concurrency or Rate option as given; the subscription builds its Limiter when
// it opens, on the App's clock.
type limitSpec struct {
	name     string // the option, for errors
	scope    string // LimitScope; "" for the subscription's name
	n        int    // concurrency; 0 for a rate
	interval time.Duration
	burst    int
	store    LimitStore
	key      func(Delivery) string
	lease    time.Duration
	poll     time.Duration
}

// Concurrency runs at most n handlers of the subscription at once, per key with PerKey, across
// every process that shares its store (SharedIn). A delivery waits for a slot with its claim
// kept valid and no attempt spent (see Limiter). Concurrency composes with Workers (which
// bounds this process) and Rate; limits are taken in the order given, so put Concurrency before
// Rate to start a handler as soon as its token is taken. Not for batch subscriptions.
func Concurrency(n int, opts ...LimitOption) Option {
	return limitOption(limitSpec{name: "Concurrency(" + strconv.Itoa(n) + ")", n: n, lease: DefaultSlotLease, poll: DefaultSlotPoll}, n >= 1, opts)
}

// Rate starts at most r handlers of the subscription per period per, with bursts of up to
// burst at once, per key with PerKey, across every process that shares its store (SharedIn).
// Over a long run the starts approach burst + r·(elapsed/per). A delivery waits for its token
// with its claim kept valid and no attempt spent (see Limiter).
func Rate(r int, per time.Duration, burst int, opts ...LimitOption) Option {
	spec := limitSpec{name: fmt.Sprintf("Rate(%d, %v, %d)", r, per, burst), burst: burst}
	if r >= 1 && per > 0 {
		spec.interval = per / time.Duration(r)
	}
	return limitOption(spec, spec.interval > 0 && burst >= 1, opts)
}

func limitOption(spec limitSpec, valid bool, opts []LimitOption) Option {
	return OptionFunc(func(o *Options) error {
		if !valid {
			return fmt.Errorf("%s: the limit must be positive (a rate needs r ≥ 1, per > 0, burst ≥ 1)", spec.name)
		}
		for _, opt := range opts {
			if opt == nil {
				return fmt.Errorf("%s: nil option", spec.name)
			}
			if err := opt(&spec); err != nil {
				return fmt.Errorf("%s: %w", spec.name, err)
			}
		}
		o.limits = append(o.limits, spec)
		return nil
	})
}

// gate is one limit of a running subscription.
type gate struct {
	l     Limiter
	key   func(Delivery) string
	learn LimitLearner
}

// gates builds the subscription's limits on clk; scope names the subscription in the store.
func buildGates(specs []limitSpec, scope string, clk clock.Clock, log *slog.Logger) []gate {
	var local LimitStore
	gs := make([]gate, 0, len(specs))
	for _, sp := range specs {
		store := sp.store
		if store == nil {
			if local == nil {
				local = NewMemoryLimitStore()
			}
			store = local
		}
		var g gate
		sc := scope
		if sp.scope != "" {
			sc = sp.scope
		}
		if sp.n > 0 {
			g.l = NewConcurrencyLimiter(store, sc, sp.n, clk, sp.lease, sp.poll, log)
		} else {
			rl := NewRateLimiter(store, sc, sp.interval, sp.burst, clk)
			g.l, g.learn = rl, rl
		}
		g.key = sp.key
		gs = append(gs, g)
	}
	return gs
}

// concurrency is the Limiter of Concurrency.
type concurrency struct {
	store       LimitStore
	scope       string
	n           int
	clk         clock.Clock
	lease, poll time.Duration
	prefix      string
	seq         atomic.Uint64
	log         *slog.Logger
}

// NewConcurrencyLimiter returns a Limiter that lets at most n holders of each key (prefixed by
// scope) run at once, its slots kept in store under leases of lease, renewed at half the lease
// while held; a waiting caller asks again every poll (jittered) on clk. A renewal or release
// that fails is logged to log (nil: discarded); the slot then lapses at its lease's end.
func NewConcurrencyLimiter(store LimitStore, scope string, n int, clk clock.Clock, lease, poll time.Duration, log *slog.Logger) Limiter {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &concurrency{store: store, scope: scope + "/", n: n, clk: clk, lease: lease, poll: poll, prefix: hex.EncodeToString(b[:]) + "-", log: log}
}

func (c *concurrency) Acquire(ctx context.Context, key string) (func(), error) {
	k := c.scope + key
	holder := c.prefix + strconv.FormatUint(c.seq.Add(1), 36)
	for {
		ok, err := c.store.AcquireSlot(ctx, k, c.n, holder, c.clk.Now(), c.lease)
		if err != nil {
			return nil, fmt.Errorf("acquiring a concurrency slot of %q: %w", k, err)
		}
		if ok {
			break
		}
		if err := clock.Sleep(ctx, c.clk, clock.Jitter(c.poll)); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	done := false
	var renew clock.Timer
	mu.Lock() // renew is assigned before its first run reads it
	defer mu.Unlock()
	renew = c.clk.AfterFunc(c.lease/2, func() {
		if err := c.store.RenewSlot(context.Background(), k, holder, c.clk.Now(), c.lease); err != nil {
			c.log.Warn("settle: renewing a concurrency slot failed; it lapses at its lease's end unless a later renewal succeeds",
				"limit_key", k, "lease", c.lease, "error", err)
		}
		mu.Lock()
		if !done {
			renew.Reset(c.lease / 2)
		}
		mu.Unlock()
	})
	return func() {
		mu.Lock()
		done = true
		renew.Stop()
		mu.Unlock()
		if err := c.store.ReleaseSlot(context.Background(), k, holder); err != nil {
			c.log.Warn("settle: releasing a concurrency slot failed; it stays taken until its lease ends",
				"limit_key", k, "lease", c.lease, "error", err)
		}
	}, nil
}

// rate is the Limiter of Rate.
type rate struct {
	store    LimitStore
	scope    string
	interval time.Duration
	burst    int
	clk      clock.Clock
}

// NewRateLimiter returns a Limiter that gives each key (prefixed by scope) a token every
// interval, burst at once, its state kept in store; it is a LimitLearner.
func NewRateLimiter(store LimitStore, scope string, interval time.Duration, burst int, clk clock.Clock) interface {
	Limiter
	LimitLearner
} {
	return &rate{store: store, scope: scope + "/", interval: interval, burst: burst, clk: clk}
}

func noRelease() {}

func (r *rate) Acquire(ctx context.Context, key string) (func(), error) {
	k := r.scope + key
	for {
		wait, err := r.store.TakeToken(ctx, k, r.clk.Now(), r.interval, r.burst)
		if err != nil {
			return nil, fmt.Errorf("taking a rate token of %q: %w", k, err)
		}
		if wait <= 0 {
			return noRelease, nil
		}
		if err := clock.Sleep(ctx, r.clk, wait); err != nil {
			return nil, err
		}
	}
}

func (r *rate) Backoff(ctx context.Context, key string, d time.Duration) error {
	return r.store.Backoff(ctx, r.scope+key, r.clk.Now().Add(d), r.interval, r.burst)
}

// MemoryLimitStore is a LimitStore in this process's memory: limits shared by the Apps of one
// process, and the reference for custom stores.
type MemoryLimitStore struct {
	mu    sync.Mutex
	slots map[string]map[string]time.Time // key → holder → lease end
	tat   map[string]time.Time            // key → theoretical arrival time
}

// NewMemoryLimitStore returns an empty MemoryLimitStore.
func NewMemoryLimitStore() *MemoryLimitStore {
	return &MemoryLimitStore{slots: make(map[string]map[string]time.Time), tat: make(map[string]time.Time)}
}

// AcquireSlot implements LimitStore.
func (m *MemoryLimitStore) AcquireSlot(_ context.Context, key string, n int, holder string, now time.Time, lease time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.slots[key]
	if held == nil {
		held = make(map[string]time.Time)
		m.slots[key] = held
	}
	for h, until := range held {
		if !until.After(now) {
			delete(held, h)
		}
	}
	if len(held) >= n {
		return false, nil
	}
	held[holder] = now.Add(lease)
	return true, nil
}

// RenewSlot implements LimitStore.
func (m *MemoryLimitStore) RenewSlot(_ context.Context, key, holder string, now time.Time, lease time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.slots[key][holder]; ok {
		m.slots[key][holder] = now.Add(lease)
	}
	return nil
}

// ReleaseSlot implements LimitStore.
func (m *MemoryLimitStore) ReleaseSlot(_ context.Context, key, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.slots[key], holder)
	if len(m.slots[key]) == 0 {
		delete(m.slots, key)
	}
	return nil
}

// TakeToken implements LimitStore.
func (m *MemoryLimitStore) TakeToken(_ context.Context, key string, now time.Time, interval time.Duration, burst int) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tat := m.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if over := next.Sub(now) - time.Duration(burst)*interval; over > 0 {
		return over, nil
	}
	m.tat[key] = next
	return 0, nil
}

// Backoff implements LimitStore.
func (m *MemoryLimitStore) Backoff(_ context.Context, key string, until time.Time, interval time.Duration, burst int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := until.Add(time.Duration(burst-1) * interval); t.After(m.tat[key]) {
		m.tat[key] = t
	}
	return nil
}

// ThrottledError is what Throttled returns: the handler's downstream refused for now (an HTTP
// 429), and the subscription's rate limiters are told to give no token before After.
type ThrottledError struct {
	After time.Duration
	Cause error
}

func (e *ThrottledError) Error() string {
	s := "throttled by the downstream, retry after " + e.After.String()
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *ThrottledError) Unwrap() error { return e.Cause }

// Throttled is what a handler returns when its downstream answered "too many requests" and
// asked for d of quiet (Retry-After): every rate limit of the subscription (for the
// delivery's key) gives no token before d has passed, in every process sharing its store, and
// the message is retried after d as RetryAfter(d) would (the attempt counts: the handler ran).
// cause may be nil.
func Throttled(d time.Duration, cause error) error {
	return &ThrottledError{After: max(d, 0), Cause: cause}
}
