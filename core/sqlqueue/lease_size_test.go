package sqlqueue

import (
	"slices"
	"testing"
	"time"
)

// TestLeaseClaimSizeAdapts: without BatchSize the lease form's claims start at the base size,
// double while they come back full and are got through in under batchCycle, up to
// DefaultMaxBatch, and halve, down to the base, when they come back less than half full or
// take over four cycles. A BatchSize, or a rescue claim, leaves the size alone.
func TestLeaseClaimSizeAdapts(t *testing.T) {
	newL := func(auto bool) *lease {
		l := &lease{rt: &runtime{cfg: config{batch: 10, batchAuto: auto}}}
		l.size.Store(10)
		return l
	}
	at := time.Unix(1000, 0)
	step := func(l *lease, got int, after time.Duration) int {
		at = at.Add(after)
		l.adapt(got, int(l.size.Load()), at)
		return int(l.size.Load())
	}
	l := newL(true)
	step(l, 10, time.Second) // the first claim: no cycle to judge yet
	l.size.Store(10)
	var sizes []int
	for range 5 {
		sizes = append(sizes, step(l, int(l.size.Load()), 5*time.Millisecond))
	}
	if want := []int{20, 40, 80, 100, 100}; !slices.Equal(sizes, want) {
		t.Errorf("full, fast claims: sizes %v; want %v", sizes, want)
	}
	if got := step(l, 100, 150*time.Millisecond); got != 100 {
		t.Errorf("a full claim got through in 150 ms: size %d; want it kept at 100", got)
	}
	if got := step(l, 100, time.Second); got != 50 {
		t.Errorf("a full claim that took 1 s: size %d; want 50", got)
	}
	if got := step(l, 10, time.Millisecond); got != 25 {
		t.Errorf("a claim 10 of 50 full: size %d; want 25", got)
	}
	for range 4 {
		step(l, 0, time.Millisecond)
	}
	if got := int(l.size.Load()); got != 10 {
		t.Errorf("empty claims: size %d; want the base, 10", got)
	}

	fixed := newL(false)
	for range 3 {
		step(fixed, 10, time.Millisecond)
	}
	if got := int(fixed.size.Load()); got != 10 {
		t.Errorf("BatchSize given: size %d; want it fixed at 10", got)
	}
	rescue := newL(true)
	rescue.lapsed = true
	for range 3 {
		step(rescue, 1, time.Millisecond)
	}
	if got := int(rescue.size.Load()); got != 10 {
		t.Errorf("rescue claims: size %d; want 10 (a rescue takes one row and says nothing of the rate)", got)
	}
}
