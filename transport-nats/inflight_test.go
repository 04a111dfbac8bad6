package natsjs

import "testing"

// The sequences a subscription remembers as just settled are bounded: the oldest is forgotten
// when the table is full.
func TestRecentSettledBounded(t *testing.T) {
	var r recentSet
	for i := range uint64(recentSettled + 10) {
		r.add(seqKey{"s", i + 1}, ackFrame)
	}
	if n := r.len(); n != recentSettled {
		t.Fatalf("remembers %d sequences; want %d", n, recentSettled)
	}
	for i := range uint64(10) {
		if _, ok := r.get(seqKey{"s", i + 1}); ok {
			t.Errorf("sequence %d still remembered", i+1)
		}
	}
	if b, ok := r.get(seqKey{"s", recentSettled + 10}); !ok || string(b) != "+ACK" {
		t.Errorf("newest sequence: %q, %v", b, ok)
	}
	if _, ok := r.get(seqKey{"other", recentSettled + 10}); ok {
		t.Error("a sequence of another stream is remembered")
	}
	r.add(seqKey{"s", recentSettled + 10}, termFrame) // again: updated, not a second entry
	if b, _ := r.get(seqKey{"s", recentSettled + 10}); string(b) != "+TERM" || r.len() != recentSettled {
		t.Errorf("re-added: %q, %d entries", b, r.len())
	}
}
