package transporttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// The "Ordered" section proves core.Ordered on a backend that declares Features.Ordered: the
// messages of one ordering key run one at a time, in publish order, across the subscriptions of
// two Apps; a retried message holds its key, and a drop or a dead letter releases it; an
// abandoned head comes back before its successors; a key with a long backlog does not starve
// the others. A backend that declares Refused must refuse core.Ordered with core.ErrUnsupported.

// OrderedKeys and OrderedPerKey size the ledger case: OrderedKeys keys of OrderedPerKey messages
// each. A slow backend may lower them in its own test; the in-memory broker runs them as they
// are. OrderedHotBacklog is the backlog of the hot key of the fairness case.
var (
	OrderedKeys       = 1000
	OrderedPerKey     = 20
	OrderedHotBacklog = 2000
	// OrderedTimeout bounds how long a case of the section waits for its messages to settle.
	OrderedTimeout = 5 * time.Minute
)

var ordered = []testCase{
	{"Refusal", orderedRefusal},
	{"Ledger", orderedLedger},
	{"AbandonedHeadComesBackFirst", orderedAbandoned},
	{"HotKeyDoesNotStarveOthers", orderedFairness},
}

// requireOrdered skips the case unless the backend declares Features.Ordered Supported, and
// returns its Targeter: ordering keys are published through core's publish API.
func requireOrdered(t *testing.T, env Env) Targeter {
	t.Helper()
	switch env.Features.Ordered {
	case Undeclared:
		t.Skip("Features.Ordered is not declared: set it to transporttest.Supported once the backend honours core.Ordered() (its endpoint reads Options.Ordered in Open), or to transporttest.Refused while it refuses it")
	case Refused:
		t.Skip("Features.Ordered is Refused: the Refusal case proves the refusal")
	}
	tg := targeter(t, env)
	if env.Features.Publish.OrderingKey != Supported {
		t.Fatal("Features.Ordered is Supported but Features.Publish.OrderingKey is not: ordered subscriptions need the ordering key carried to the delivery")
	}
	return tg
}

// orderedHint names the capability an ordering failure is about.
const orderedHint = " (Features.Ordered is Supported: declare it transporttest.Refused, and refuse core.Ordered() with core.ErrUnsupported, if the backend cannot order keys)"

func orderedRefusal(t *testing.T, env Env) {
	if env.Features.Ordered != Refused {
		t.Skipf("Features.Ordered is %v: the case proves the refusal of a backend that declares it Refused", env.Features.Ordered)
	}
	a := core.New(core.WithClock(env.Clock), core.WithLogger(logger(t)), core.WithoutSignals())
	env.Backend.Register(a)
	if err := core.Subscribe(a, env.Backend.Endpoint("work"), func(context.Context, *core.Message[string]) error { return nil },
		core.Ordered(), core.DeadLetterAfter(3, deadLetter(env, "work.dead"))); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	err := a.Run(ctx)
	if !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "core.Ordered()") {
		t.Fatalf("App.Run with core.Ordered() = %v; want an error matching core.ErrUnsupported that names core.Ordered() (Features.Ordered is Refused: declare it Supported if the backend orders keys)", err)
	}
	t.Logf("refused: %v", err)
}

// plan is what the ledger case's handler does with one message.
type plan uint8

const (
	planAck        plan = iota
	planRetry           // retry once, then ack
	planRetryAfter      // retry after a delay once, then ack
	planDrop            // drop at once
	planDeadLetter      // retry, retry after a delay, retry: dead-lettered at the cap of 3
)

// ledger records, per key, the handler that runs and how many of its messages settled for
// good, and the violations it saw.
type ledger struct {
	mu         sync.Mutex
	keys       []keyState
	free       int // unkeyed messages handled
	violations []string
	released   int // successors that started after a drop or a dead letter of their predecessor
	remaining  int // messages not settled for good yet
	done       chan struct{}
}

type keyState struct {
	running bool
	settled int  // messages of the key that settled for good: the next to start is seq settled
	last    plan // how the last one settled
}

func (l *ledger) violate(format string, args ...any) {
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// start records that the handler of key k, message seq, started at attempt.
func (l *ledger) start(k, seq, attempt int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.keys[k]
	switch {
	case s.running:
		l.violate("key %d: message %d (attempt %d) started while another handler of the key ran", k, seq, attempt)
	case seq != s.settled:
		l.violate("key %d: message %d (attempt %d) started while message %d had not settled", k, seq, attempt, s.settled)
	case seq > 0 && attempt == 1 && (s.last == planDrop || s.last == planDeadLetter):
		l.released++
	}
	s.running = true
}

// end records that the handler returned; final when the message settles for good with it.
func (l *ledger) end(k int, final bool, p plan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.keys[k]
	s.running = false
	if final {
		s.settled++
		s.last = p
		l.finish()
	}
}

// finish counts one message settled for good; l.mu is held.
func (l *ledger) finish() {
	if l.remaining--; l.remaining == 0 {
		close(l.done)
	}
}

func (l *ledger) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(OrderedTimeout):
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("%d messages of the ordered subscriptions had not settled after %v; violations: %v%s", l.remaining, OrderedTimeout, l.violations, orderedHint)
	}
}

// pump fires the virtual clock's timers as they are armed (the retry-after copies) until stop
// is called, which returns once it has stopped; on real time it does nothing.
func pump(env Env) (stop func()) {
	if env.Virtual == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if due, ok := env.Virtual.NextDue(); ok {
				env.Virtual.AdvanceTo(due)
				continue
			}
			_ = env.Virtual.BlockUntil(ctx, 1)
		}
	}()
	return func() { cancel(); <-done }
}

// orderedHandler returns the ledger case's handler: each message does what plans says, and the
// ledger checks that it started in its turn.
func orderedHandler(env Env, l *ledger, plans [][]plan) core.Handler[string] {
	d := delay(env) / 100
	return func(ctx context.Context, m *core.Message[string]) error {
		key, seqs, ok := strings.Cut(m.Payload, "/")
		if key == "free" {
			l.mu.Lock()
			l.free++
			l.finish()
			l.mu.Unlock()
			return nil
		}
		k, err1 := strconv.Atoi(strings.TrimPrefix(key, "k"))
		seq, err2 := strconv.Atoi(seqs)
		if !ok || err1 != nil || err2 != nil || core.OrderingKeyOf(m.Delivery()) != key {
			return core.Drop().Because(fmt.Errorf("unexpected message %q with key %q", m.Payload, core.OrderingKeyOf(m.Delivery())))
		}
		l.start(k, seq, m.Attempt())
		p, a := plans[k][seq], m.Attempt()
		var out error
		switch {
		case p == planAck || (p == planRetry || p == planRetryAfter) && a > 1:
		case p == planRetry, p == planDeadLetter && a != 2:
			out = core.Retry()
		case p == planRetryAfter, p == planDeadLetter:
			out = core.RetryAfter(d)
		case p == planDrop:
			out = core.Drop()
		}
		l.end(k, out == nil || p == planDrop || p == planDeadLetter && a >= 3, p)
		return out
	}
}

// orderedPlans draws what the handler does with each of per messages of keys keys, and counts
// the dead letters that makes.
func orderedPlans(rng *rand.Rand, keys, per int) (plans [][]plan, dead int) {
	plans = make([][]plan, keys)
	for k := range plans {
		plans[k] = make([]plan, per)
		for s := range plans[k] {
			switch r := rng.IntN(100); {
			case r < 55:
				plans[k][s] = planAck
			case r < 67:
				plans[k][s] = planRetry
			case r < 79:
				plans[k][s] = planRetryAfter
			case r < 90:
				plans[k][s] = planDrop
			default:
				plans[k][s] = planDeadLetter
				dead++
			}
		}
	}
	return plans, dead
}

// publishOrdered publishes per rounds of one message of each of keys keys ("k7/3" with key "k7"),
// with the free unkeyed messages spread over the rounds.
func publishOrdered(t *testing.T, pub *core.Publisher[string], keys, per, free int) {
	t.Helper()
	ctx := publishCtx(t, PublishTimeout)
	for s := range per {
		for k := range keys {
			if _, err := pub.Publish(ctx, fmt.Sprintf("k%d/%d", k, s), core.OrderingKey(fmt.Sprintf("k%d", k))); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
		for i := free * s / per; i < free*(s+1)/per; i++ {
			if _, err := pub.Publish(ctx, fmt.Sprintf("free/%d", i)); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
	}
}

func orderedLedger(t *testing.T, env Env) {
	tg := requireOrdered(t, env)
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	keys, per, free := OrderedKeys, OrderedPerKey, OrderedKeys/2
	plans, dead := orderedPlans(rng, keys, per)
	l := &ledger{keys: make([]keyState, keys), remaining: keys*per + free, done: make(chan struct{})}
	h := orderedHandler(env, l, plans)
	// Two Apps stand in for two processes, each with two subscriptions. They run at once, so
	// the leak check is taken around both (and the clock's pump).
	leaks := env.LeakCheck.Check(t)
	stopPump := sync.OnceFunc(pump(env))
	defer stopPump()
	both := env
	both.LeakCheck = nil
	var apps []*app
	for i := range 2 {
		apps = append(apps, startApp(t, both, 10*time.Second, func(a *core.App) {
			for j := range 2 {
				if err := core.Subscribe(a, env.Backend.Endpoint("work"), h, core.Ordered(), core.Workers(4),
					core.Name(fmt.Sprintf("ordered-%d-%d", i, j)), core.WithCodec(core.Raw),
					core.DeadLetterAfter(3, deadLetter(env, "work.dead"))); err != nil {
					t.Fatalf("Subscribe: %v", err)
				}
			}
		}))
	}
	publishOrdered(t, publisherTo(t, tg, "work"), keys, per, free)
	l.wait(t)
	stopPump()
	for _, a := range apps {
		a.stop()
	}
	leaks()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) > 0 {
		t.Fatalf("seed %d: ordering violated:\n%s%s", seed, strings.Join(l.violations, "\n"), orderedHint)
	}
	if l.free != free {
		t.Errorf("%d unkeyed messages handled, want %d", l.free, free)
	}
	if l.released == 0 {
		t.Errorf("seed %d: no successor of a dropped or dead-lettered message ever started: the plan has none, or keys stay held%s", seed, orderedHint)
	}
	if got := drainAtLeast(t, env, "work.dead", dead); len(got) != dead {
		t.Errorf("%d dead letters, want %d", len(got), dead)
	}
	t.Logf("seed %d: %d keys × %d messages and %d unkeyed on 4 subscriptions in 2 Apps; %d dead letters, %d successors released by a drop or a dead letter",
		seed, keys, per, free, dead, l.released)
}

// starts is a handler that records the bodies it starts, in order.
type starts struct {
	mu     sync.Mutex
	bodies []string
}

func (s *starts) add(b string) {
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
}

func (s *starts) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func orderedAbandoned(t *testing.T, env Env) {
	tg := requireOrdered(t, env)
	dead := core.DeadLetterAfter(5, deadLetter(env, "work.dead"))
	var first starts
	headStarted := make(chan struct{})
	var once sync.Once
	shutdown := shutdownTimeout(env)
	a := startApp(t, env, shutdown, func(a *core.App) {
		h := func(ctx context.Context, m *core.Message[string]) error {
			first.add(m.Payload)
			if m.Payload == "a/0" {
				once.Do(func() { close(headStarted) })
				<-ctx.Done() // held until the App stops: abandoned
				return ctx.Err()
			}
			return nil
		}
		if err := core.Subscribe(a, env.Backend.Endpoint("work"), h, core.Ordered(), core.Workers(3), core.WithCodec(core.Raw), dead); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	})
	pub := publisherTo(t, tg, "work")
	ctx := publishCtx(t, coretest.WaitTimeout)
	for _, b := range []string{"a/0", "a/1", "b/0"} {
		if _, err := pub.Publish(ctx, b, core.OrderingKey(b[:1])); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	select {
	case <-headStarted:
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("a/0 was not delivered within %v", coretest.WaitTimeout)
	}
	a.rec.WaitFor(func(s []core.Settlement) bool { return len(s) >= 1 }) // b/0, another key, runs beside the held a/0
	stopAbandoning(t, env, a, shutdown)
	if got := first.list(); len(got) != 2 || got[0] != "a/0" || got[1] != "b/0" {
		t.Fatalf("the first App started %v; want [a/0 b/0]: a/1 must wait for a/0, and b/0 must not%s", got, orderedHint)
	}
	var second starts
	b := start(t, env, func(_ context.Context, m *core.Message[string]) error {
		second.add(m.Payload)
		return nil
	}, shutdown, core.Ordered(), core.Workers(3), core.WithCodec(core.Raw), dead)
	b.rec.WaitSettled(2)
	if got := second.list(); len(got) != 2 || got[0] != "a/0" || got[1] != "a/1" {
		t.Fatalf("after the abandonment the second App started %v; want [a/0 a/1]: an abandoned head comes back before its successors%s", got, orderedHint)
	}
}

func orderedFairness(t *testing.T, env Env) {
	tg := requireOrdered(t, env)
	const coldKeys, perCold = 50, 2
	hot := OrderedHotBacklog
	var mu sync.Mutex
	hotDone, coldDone, hotAtCold := 0, 0, -1
	coldAll := make(chan struct{})
	h := func(_ context.Context, m *core.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(m.Payload, "hot/") {
			hotDone++
			return nil
		}
		if coldDone++; coldDone == coldKeys*perCold {
			hotAtCold = hotDone
			close(coldAll)
		}
		return nil
	}
	start := time.Now()
	a := startApp(t, env, 10*time.Second, func(a *core.App) {
		pub := publisherTo(t, tg, "work")
		ctx := publishCtx(t, PublishTimeout)
		for i := range hot {
			if _, err := pub.Publish(ctx, fmt.Sprintf("hot/%d", i), core.OrderingKey("hot")); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
		for s := range perCold {
			for k := range coldKeys {
				if _, err := pub.Publish(ctx, fmt.Sprintf("cold%d/%d", k, s), core.OrderingKey(fmt.Sprintf("cold%d", k))); err != nil {
					t.Fatalf("Publish: %v", err)
				}
			}
		}
		// One worker: the handling order is the order of claims, whatever the scheduler does
		// (with several, workers paused holding the last other keys' messages would let the
		// hot key run on without any unfairness of the backend).
		if err := core.Subscribe(a, env.Backend.Endpoint("work"), h, core.Ordered(), core.Workers(1), core.WithCodec(core.Raw)); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	})
	select {
	case <-coldAll:
	case <-time.After(OrderedTimeout):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("after %v the other keys had %d of %d messages handled and the hot key %d of %d: a key's backlog starves the others%s",
			OrderedTimeout, coldDone, coldKeys*perCold, hotDone, hot, orderedHint)
	}
	a.stop()
	mu.Lock()
	defer mu.Unlock()
	if hotAtCold > hot/2 {
		t.Fatalf("the other keys' %d messages (published after the hot key's %d) finished only after %d hot ones: claims do not rotate over keys%s",
			coldKeys*perCold, hot, hotAtCold, orderedHint)
	}
	t.Logf("the other keys' %d messages finished after %d of the hot key's %d (%v)", coldKeys*perCold, hotAtCold, hot, time.Since(start).Round(time.Millisecond))
}
