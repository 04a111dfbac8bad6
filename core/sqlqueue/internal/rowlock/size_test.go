package rowlock

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// TestRowLockClaimSizeAdapts: the row-lock form doubles a clean claim up to the base size as
// before; past it, without BatchSize, only a full claim finished within batchCycle grows the
// next (as the lease form's do, up to DefaultMaxBatch), one that took over four cycles halves it towards the base, and
// a claim that rolled back halves it whatever the size. With a BatchSize the base is the cap.
func TestRowLockClaimSizeAdapts(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	newR := func(auto bool) *Source {
		r := &Source{rt: &engine.Runtime{Cfg: engine.Config{Batch: 10, BatchAuto: auto, BatchMax: engine.DefaultMaxBatch}, Clock: vc}}
		r.cl.src, r.rescue.src = r, r
		r.cl.size.Store(1)
		return r
	}
	// claim runs one claim of the current size that comes back with got rows and is finished
	// after took, committing with err.
	claim := func(r *Source, got int, took time.Duration, err error) int {
		size := int(r.cl.size.Load())
		b := &batch{ds: make([]delivery, got), at: r.rt.Now(), full: got == size}
		for i := range b.ds {
			b.results = append(b.results, item{d: &b.ds[i], v: core.Verdict{Action: core.ActAck}})
		}
		vc.Advance(took)
		r.cl.adapt(b, err)
		return int(r.cl.size.Load())
	}
	r := newR(true)
	var sizes []int
	for range 11 {
		sizes = append(sizes, claim(r, int(r.cl.size.Load()), time.Millisecond, nil))
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
		claim(fixed, int(fixed.cl.size.Load()), time.Millisecond, nil)
	}
	if got := int(fixed.cl.size.Load()); got != 10 {
		t.Errorf("BatchSize(10): size %d; want it capped at 10", got)
	}
}
