package lease

import (
	"slices"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// TestLeaseClaimSizeAdapts: without BatchSize the lease form's claims start at the base size,
// grow (at least double, at most batching.MaxGrowth times, towards batchCycle's worth) while they come
// back full and are got through in under batchCycle, up to
// DefaultMaxBatch (or a lower FlushLimits maximum), and halve, down to the base, when they come back less than half full or
// take over four cycles. A BatchSize, or a rescue claim, leaves the size alone.
func TestLeaseClaimSizeAdapts(t *testing.T) {
	newL := func(auto bool) *Source {
		l := &Source{rt: &engine.Runtime{Cfg: engine.Config{Batch: 10, BatchAuto: auto, BatchMax: engine.DefaultMaxBatch}}}
		l.cl.src = l
		l.cl.size.Store(10)
		return l
	}
	at := time.Unix(1000, 0)
	step := func(l *Source, got int, after time.Duration) int {
		at = at.Add(after)
		l.cl.adapt(got, int(l.cl.size.Load()), at)
		return int(l.cl.size.Load())
	}
	l := newL(true)
	// The first claim has no earlier one to time the workers by: full, it doubles the next.
	if got := step(l, 10, time.Hour); got != 20 {
		t.Errorf("a full first claim: size %d; want 20", got)
	}
	l.cl.size.Store(10)
	var sizes []int
	for range 4 {
		sizes = append(sizes, step(l, int(l.cl.size.Load()), 5*time.Millisecond))
	}
	// Got through in 5 ms, a claim's rows would fill 20 such claims' time: growth is capped at
	// batching.MaxGrowth.
	if want := []int{80, 500, 500, 500}; !slices.Equal(sizes, want) {
		t.Errorf("full, fast claims: sizes %v; want %v", sizes, want)
	}
	if got := step(l, 500, 150*time.Millisecond); got != 500 {
		t.Errorf("a full claim got through in 150 ms: size %d; want it kept at 500", got)
	}
	if got := step(l, 500, time.Second); got != 250 {
		t.Errorf("a full claim that took 1 s: size %d; want 250", got)
	}
	if got := step(l, 100, time.Millisecond); got != 125 {
		t.Errorf("a claim 100 of 250 full: size %d; want 125", got)
	}
	for range 5 {
		step(l, 0, time.Millisecond)
	}
	if got := int(l.cl.size.Load()); got != 10 {
		t.Errorf("empty claims: size %d; want the base, 10", got)
	}

	// Slower workers grow the claims towards what they get through in batchCycle, and at least
	// double them while a full claim takes less.
	for _, c := range []struct {
		took time.Duration
		want int
	}{{25 * time.Millisecond, 40}, {50 * time.Millisecond, 20}, {80 * time.Millisecond, 20}, {150 * time.Millisecond, 10}} {
		mid := newL(true)
		step(mid, 10, 0)
		mid.cl.size.Store(10)
		if got := step(mid, 10, c.took); got != c.want {
			t.Errorf("a full claim of 10 got through in %v: size %d; want %d", c.took, got, c.want)
		}
	}

	low := newL(true)
	low.rt.Cfg.BatchMax = 50 // FlushLimits(50, …): a claim's settlements fit one flush
	for range 4 {
		step(low, int(low.cl.size.Load()), time.Millisecond)
	}
	if got := int(low.cl.size.Load()); got != 50 {
		t.Errorf("full, fast claims under a ceiling of 50: size %d; want 50", got)
	}

	fixed := newL(false)
	for range 3 {
		step(fixed, 10, time.Millisecond)
	}
	if got := int(fixed.cl.size.Load()); got != 10 {
		t.Errorf("BatchSize given: size %d; want it fixed at 10", got)
	}
	rescue := newL(true)
	rescue.rescue.lapsed = true
	for range 3 {
		step(rescue, 1, time.Millisecond)
	}
	if got := int(rescue.cl.size.Load()); got != 10 {
		t.Errorf("rescue claims: size %d; want 10 (a rescue takes one row and says nothing of the rate)", got)
	}
}

func TestTokensIncrease(t *testing.T) {
	var k tokens
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := k.next(at), k.next(at)
	if !b.After(a) || b.Sub(a) != time.Microsecond {
		t.Errorf("tokens %v then %v; want strictly increasing by 1µs", a, b)
	}
	if c := k.next(at.Add(time.Second)); !c.Equal(at.Add(time.Second)) {
		t.Errorf("a later time is its own token; got %v", c)
	}
}
