package lease

import (
	"sync"
)

// handout is what Next hands out: the current claim, from its next row on, and the claim the
// claimer goroutine made ahead (ahead.go) until Next takes it. Next, the claimer and the
// give-back when the subscription stops meet here, under its one lock.
type handout struct {
	mu       sync.Mutex
	cur      *batch
	pos      int
	stopping bool // the subscription stopped pulling: nothing more is handed out

	// the claim ahead
	pending     *batch        // the claim the claimer made, until Next takes it
	pendingDone cycleDone     // the settlements its cycle committed, unreported
	hasPending  bool          // the claimer's last outcome is not taken yet
	waiting     bool          // Next waits for the claimer's cycle
	awaitTake   bool          // the claimer waits for Next to take the pending claim
	taken       chan struct{} // Next took the pending claim (sent when awaitTake is set)
}

// nextLocked returns the next delivery of the current claim, nil when it has none left (and
// drops it); first says it is its claim's first. h.mu is held.
func (h *handout) nextLocked() (d *delivery, first bool) {
	if h.cur != nil && h.pos < len(h.cur.ds) {
		d := &h.cur.ds[h.pos]
		h.pos++
		return d, h.pos == 1
	}
	h.cur = nil
	return nil, false
}

// unhandedLocked takes every claimed delivery not handed out, the claim ahead's included, and
// hands out nothing more; h.mu is held. done is the settlements the claim ahead's cycle
// committed, which Next may now never report.
func (h *handout) unhandedLocked() (rest []*delivery, done cycleDone) {
	h.stopping = true
	if h.cur != nil {
		for i := h.pos; i < len(h.cur.ds); i++ {
			rest = append(rest, &h.cur.ds[i])
		}
		h.cur = nil
	}
	if h.pending != nil { // claimed ahead: none of it was handed out
		for i := range h.pending.ds {
			rest = append(rest, &h.pending.ds[i])
		}
	}
	done = h.pendingDone
	h.takePendingLocked()
	return rest, done
}

// takePendingLocked empties the claim ahead's slot and lets a claimer waiting for that go on;
// h.mu is held.
func (h *handout) takePendingLocked() {
	h.pending, h.pendingDone, h.hasPending = nil, cycleDone{}, false
	if h.awaitTake {
		h.awaitTake = false
		h.taken <- struct{}{}
	}
}
