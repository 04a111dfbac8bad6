package lease

import (
	"sync"
	"time"

	"github.com/settlehq/settle/core"
)

// batch is the deliveries of one claim.
type batch struct {
	src  *Source
	ds   []delivery
	left int // not yet settled; under tracker.mu
}

// tracker keeps the claimed deliveries that are not settled yet: the extender renews their
// leases, and the settler's flushes are timed by how many there are.
type tracker struct {
	mu          sync.Mutex
	batches     []*batch
	outstanding int // claimed, not yet settled
}

// add tracks a claim's deliveries.
func (t *tracker) add(b *batch) {
	t.mu.Lock()
	t.batches = append(t.batches, b)
	t.outstanding += len(b.ds)
	t.mu.Unlock()
}

// count is how many claimed deliveries are not settled yet.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outstanding
}

func (t *tracker) forget(d *delivery) {
	t.mu.Lock()
	t.forgetLocked(d)
	t.mu.Unlock()
}

// forgetAll forgets the deliveries of items under one hold of the lock.
func (t *tracker) forgetAll(items []item) {
	t.mu.Lock()
	for _, it := range items {
		t.forgetLocked(it.d)
	}
	t.mu.Unlock()
}

// forgetLocked drops d from the outstanding count and its batch; t.mu is held.
func (t *tracker) forgetLocked(d *delivery) {
	t.outstanding--
	b := d.b
	b.left--
	if b.left == 0 {
		for i, x := range t.batches {
			if x == b {
				last := len(t.batches) - 1
				t.batches[i] = t.batches[last]
				t.batches[last] = nil
				t.batches = t.batches[:last]
				break
			}
		}
	}
}

// extending returns the deliveries whose leases the extender renews: handed out or waiting to
// be, not yet finishing, not lost. Each is returned with its mutex held (a delivery being
// finished right now is left out), so that its token cannot change under a settlement. A
// handler past its Timeout and grace (handed out before overran) ignores its context: its lease
// is left to run out, so that another claim can take the row (core reports the overrun), and
// warn is told of it once.
func (t *tracker) extending(overran time.Time, warn func(*delivery)) []*delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ds []*delivery
	for _, b := range t.batches {
		for i := range b.ds {
			d := &b.ds[i]
			if !d.mu.TryLock() {
				continue // being finished right now
			}
			if d.finishing || d.settled || d.lost {
				d.mu.Unlock()
				continue
			}
			if !d.handedAt.IsZero() && d.handedAt.Before(overran) {
				if !d.overran {
					d.overran = true
					warn(d)
				}
				d.mu.Unlock()
				continue
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// item is one finished delivery waiting for its settlement.
type item struct {
	d       *delivery
	v       core.Verdict
	settled core.Settled
	err     error // how report found it settled
}
