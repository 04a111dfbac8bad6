package sqlqueue

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// TestLeaseClaimSizeAdapts: without BatchSize the lease form's claims start at the base size,
// grow (at least double, at most batching.MaxGrowth times, towards batchCycle's worth) while they come
// back full and are got through in under batchCycle, up to
// DefaultMaxBatch (or a lower FlushLimits maximum), and halve, down to the base, when they come back less than half full or
// take over four cycles. A BatchSize, or a rescue claim, leaves the size alone.
func TestLeaseClaimSizeAdapts(t *testing.T) {
	newL := func(auto bool) *lease {
		l := &lease{rt: &runtime{cfg: config{batch: 10, batchAuto: auto, batchMax: DefaultMaxBatch}}}
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
	// The first claim has no earlier one to time the workers by: full, it doubles the next.
	if got := step(l, 10, time.Hour); got != 20 {
		t.Errorf("a full first claim: size %d; want 20", got)
	}
	l.size.Store(10)
	var sizes []int
	for range 4 {
		sizes = append(sizes, step(l, int(l.size.Load()), 5*time.Millisecond))
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
	if got := int(l.size.Load()); got != 10 {
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
		mid.size.Store(10)
		if got := step(mid, 10, c.took); got != c.want {
			t.Errorf("a full claim of 10 got through in %v: size %d; want %d", c.took, got, c.want)
		}
	}

	low := newL(true)
	low.rt.cfg.batchMax = 50 // FlushLimits(50, …): a claim's settlements fit one flush
	for range 4 {
		step(low, int(low.size.Load()), time.Millisecond)
	}
	if got := int(low.size.Load()); got != 50 {
		t.Errorf("full, fast claims under a ceiling of 50: size %d; want 50", got)
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

// TestRowLockClaimSizeAdapts: the row-lock form doubles a clean claim up to the base size as
// before; past it, without BatchSize, only a full claim finished within batchCycle grows the
// next (as the lease form's do, up to DefaultMaxBatch), one that took over four cycles halves it towards the base, and
// a claim that rolled back halves it whatever the size. With a BatchSize the base is the cap.
func TestRowLockClaimSizeAdapts(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	newR := func(auto bool) *rowLock {
		r := &rowLock{rt: &runtime{cfg: config{batch: 10, batchAuto: auto, batchMax: DefaultMaxBatch}, clock: vc}}
		r.size.Store(1)
		return r
	}
	// claim runs one claim of the current size that comes back with got rows and is finished
	// after took, committing with err.
	claim := func(r *rowLock, got int, took time.Duration, err error) int {
		size := int(r.size.Load())
		b := &rlBatch{ds: make([]delivery, got), at: r.rt.now(), full: got == size}
		for i := range b.ds {
			b.results = append(b.results, item{d: &b.ds[i], v: core.Verdict{Action: core.ActAck}})
		}
		vc.Advance(took)
		r.adapt(b, err)
		return int(r.size.Load())
	}
	r := newR(true)
	var sizes []int
	for range 11 {
		sizes = append(sizes, claim(r, int(r.size.Load()), time.Millisecond, nil))
	}
	if want := []int{2, 4, 8, 10, 80, 500, 500, 500, 500, 500, 500}; !slices.Equal(sizes, want) {
		t.Errorf("full, fast claims: sizes %v; want %v", sizes, want)
	}
	if got := claim(r, 500, 200*time.Millisecond, nil); got != 500 {
		t.Errorf("a claim finished in 200 ms: size %d; want it kept at 500", got)
	}
	if got := claim(r, 500, time.Second, nil); got != 250 {
		t.Errorf("a claim finished in 1 s: size %d; want 250", got)
	}
	if got := claim(r, 30, time.Millisecond, nil); got != 250 {
		t.Errorf("a short claim finished fast: size %d; want it kept at 250", got)
	}
	if got := claim(r, 250, time.Millisecond, errors.New("rolled back")); got != 125 {
		t.Errorf("a claim that rolled back: size %d; want 125", got)
	}

	fixed := newR(false)
	for range 8 {
		claim(fixed, int(fixed.size.Load()), time.Millisecond, nil)
	}
	if got := int(fixed.size.Load()); got != 10 {
		t.Errorf("BatchSize(10): size %d; want it capped at 10", got)
	}
}
