package amqp

import (
	"testing"
	"time"
)

// A burst of refusals in one outage (a whole prefetch window's copies refused within a few
// milliseconds) waits the round's wait, not a doubling per message: after the outage the copies
// go out after a short wait, not after the maximum. Only a refusal after the round doubles.
func TestHoldBackDoublesPerRound(t *testing.T) {
	const lo, hi = time.Second, 30 * time.Second
	var h holdBack
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 20 { // 20 copies refused within 19 ms
		if w := h.next("/q.dead", t0.Add(time.Duration(i)*time.Millisecond), lo, hi); w != lo {
			t.Fatalf("refusal %d of the first round waits %v, want %v", i+1, w, lo)
		}
	}
	if w := h.next("/other", t0, lo, hi); w != lo {
		t.Fatalf("another destination waits %v, want its own first round's %v", w, lo)
	}
	// The originals come back after the round; the destination still refuses: the next round
	// doubles, once, for all of them.
	t1 := t0.Add(lo)
	for i := range 20 {
		if w := h.next("/q.dead", t1.Add(time.Duration(i)*time.Millisecond), lo, hi); w != 2*lo {
			t.Fatalf("refusal %d of the second round waits %v, want %v", i+1, w, 2*lo)
		}
	}
	// Rounds keep doubling up to the bound.
	now, want := t1, 2*lo
	for range 10 {
		now = now.Add(want)
		want = min(2*want, hi)
		if w := h.next("/q.dead", now, lo, hi); w != want {
			t.Fatalf("round at %v waits %v, want %v", now.Sub(t0), w, want)
		}
	}
	// A copy that gets through starts the destination over.
	h.ok("/q.dead")
	if w := h.next("/q.dead", now.Add(time.Millisecond), lo, hi); w != lo {
		t.Fatalf("after a success the wait is %v, want %v", w, lo)
	}
}
