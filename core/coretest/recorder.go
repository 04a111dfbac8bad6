package coretest

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

// Recorder is an App observer that keeps every settlement so a test can wait for reactions;
// pass its Observe to core.WithObserver. Harness embeds one; backend suites use their own.
type Recorder struct {
	t           testing.TB
	mu          sync.Mutex
	settlements []core.Settlement
	changed     chan struct{}
}

// NewRecorder returns an empty Recorder that fails t when a wait runs out.
func NewRecorder(t testing.TB) *Recorder {
	return &Recorder{t: t, changed: make(chan struct{})}
}

// Observe records s; it is a core.Observer.
func (r *Recorder) Observe(s core.Settlement) {
	r.mu.Lock()
	r.settlements = append(r.settlements, s)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// WaitSettled waits until at least n settlements have happened in total and returns them all.
// It fails the test when WaitTimeout passes with no new settlement first.
func (r *Recorder) WaitSettled(n int) []core.Settlement {
	r.t.Helper()
	return r.WaitFor(func(all []core.Settlement) bool { return len(all) >= n })
}

// WaitFor waits until cond holds for the settlements so far, and returns them. It fails the test
// when WaitTimeout passes with no new settlement: a long drain on a loaded machine is waited
// for as long as it makes progress, a stuck one fails a WaitTimeout after its last settlement.
func (r *Recorder) WaitFor(cond func([]core.Settlement) bool) []core.Settlement {
	r.t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	seen := 0
	for {
		r.mu.Lock()
		// settlements is only appended to: a view capped at its length never changes.
		all := r.settlements[:len(r.settlements):len(r.settlements)]
		ch := r.changed
		r.mu.Unlock()
		if cond(all) {
			return append([]core.Settlement(nil), all...)
		}
		if len(all) > seen {
			seen = len(all)
			deadline.Reset(WaitTimeout)
		}
		select {
		case <-ch:
		case <-deadline.C:
			r.t.Fatalf("waited %v after the last settlement; saw %d, the last ones: %v", WaitTimeout, len(all), describe(all[max(0, len(all)-20):]))
			return nil
		}
	}
}

func describe(all []core.Settlement) []string {
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.Delivery.ID() + "#" + strconv.Itoa(s.Delivery.Attempt()) + ":" + s.Verdict.String()
	}
	return out
}

// Settlements returns the settlements so far, in order.
func (r *Recorder) Settlements() []core.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Settlement(nil), r.settlements...)
}

// Verdicts returns the verdicts performed on the message with id, in order: one per handler
// call, so len(Verdicts(id)) is how many times the handler saw it.
func (r *Recorder) Verdicts(id string) []core.Verdict {
	var out []core.Verdict
	for _, s := range r.Settlements() {
		if s.Delivery.ID() == id {
			out = append(out, s.Verdict)
		}
	}
	return out
}

// Actions returns the actions of Verdicts(id).
func (r *Recorder) Actions(id string) []core.Action {
	var out []core.Action
	for _, v := range r.Verdicts(id) {
		out = append(out, v.Action)
	}
	return out
}
