package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Virtual is a Clock that moves only when told to. Advance fires every timer that falls due, in
// order of due time (ties in order of creation), and sets Now to each timer's due time as it
// fires it, so that code woken by a timer sees the time it asked for.
//
// BlockUntil lets a test wait until the code under test has armed its timers, which replaces
// every sleep in a test: arm, BlockUntil, Advance, wait for the effect.
type Virtual struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  timerHeap
	changed chan struct{} // closed and replaced whenever the set of pending timers changes
}

// NewVirtual returns a Virtual clock that reads start.
func NewVirtual(start time.Time) *Virtual {
	return &Virtual{now: start, changed: make(chan struct{})}
}

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer that fires when the virtual time reaches Now()+d.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &vtimer{clock: v, ch: make(chan time.Time, 1), index: -1}
	v.mu.Lock()
	v.schedule(t, d)
	v.mu.Unlock()
	return t
}

// AfterFunc returns a timer that calls f in its own goroutine when the virtual time reaches Now()+d.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &vtimer{clock: v, fn: f, index: -1}
	v.mu.Lock()
	v.schedule(t, d)
	v.mu.Unlock()
	return t
}

// Advance moves the clock forward by d, firing every timer due by then in order. A timer armed
// by code woken during the advance fires in the same call when it falls due within d.
func (v *Virtual) Advance(d time.Duration) {
	v.mu.Lock()
	end := v.now.Add(d)
	v.mu.Unlock()
	v.AdvanceTo(end)
}

// AdvanceTo moves the clock forward to t (never backwards), firing due timers in order.
func (v *Virtual) AdvanceTo(t time.Time) {
	for {
		v.mu.Lock()
		if len(v.timers) == 0 || v.timers[0].when.After(t) {
			if t.After(v.now) {
				v.now = t
			}
			v.mu.Unlock()
			return
		}
		next := heap.Pop(&v.timers).(*vtimer)
		next.index = -1
		if next.when.After(v.now) {
			v.now = next.when
		}
		now := v.now
		v.notify()
		v.mu.Unlock()
		next.fire(now)
	}
}

// Pending returns the number of armed timers (timers, tickers' next tick and AfterFunc calls).
func (v *Virtual) Pending() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// BlockUntil waits until at least n timers are armed on the clock, or ctx is done. Tests use
// it to know that the code under test is waiting on the clock before they Advance it.
func (v *Virtual) BlockUntil(ctx context.Context, n int) error {
	for {
		v.mu.Lock()
		if len(v.timers) >= n {
			v.mu.Unlock()
			return nil
		}
		ch := v.changed
		v.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// NextDue returns the due time of the earliest armed timer, and false when none is armed.
func (v *Virtual) NextDue() (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.timers) == 0 {
		return time.Time{}, false
	}
	return v.timers[0].when, true
}

func (v *Virtual) schedule(t *vtimer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	v.seq++
	t.seq = v.seq
	t.when = v.now.Add(d)
	heap.Push(&v.timers, t)
	v.notify()
}

func (v *Virtual) notify() {
	close(v.changed)
	v.changed = make(chan struct{})
}

type vtimer struct {
	clock *Virtual
	when  time.Time
	seq   uint64
	index int // position in the heap, -1 when not armed
	ch    chan time.Time
	fn    func()
}

func (t *vtimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

func (t *vtimer) C() <-chan time.Time { return t.ch }

func (t *vtimer) Stop() bool {
	v := t.clock
	v.mu.Lock()
	defer v.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&v.timers, t.index)
	t.index = -1
	v.notify()
	return true
}

func (t *vtimer) Reset(d time.Duration) bool {
	v := t.clock
	v.mu.Lock()
	defer v.mu.Unlock()
	was := t.index >= 0
	if was {
		heap.Remove(&v.timers, t.index)
		t.index = -1
	}
	v.schedule(t, d)
	return was
}

type timerHeap []*vtimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*vtimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}
