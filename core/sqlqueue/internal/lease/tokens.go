package lease

import (
	"sync/atomic"
	"time"
)

// tokens makes a subscription's lease tokens strictly increasing, so that two of its claims
// never stamp the same token even when the clock does not move between them (a coarse clock).
// A later claim of the same row by anyone stamps a later token anyway: it can only take the
// row once the earlier token has passed. (Claimants of one queue should share one lease length,
// or a short lease taken just as a long one expires could repeat its token.)
type tokens struct {
	last atomic.Int64 // the last token stamped, in microseconds
}

// next returns the token of a lease ending at t, later than any before it.
func (k *tokens) next(t time.Time) time.Time {
	n := t.UTC().Truncate(time.Microsecond).UnixMicro()
	for {
		last := k.last.Load()
		if n <= last {
			n = last + 1
		}
		if k.last.CompareAndSwap(last, n) {
			return time.UnixMicro(n).UTC()
		}
	}
}

// unspend gives back token, the last one next made, after its claim stamped no row: the next
// claim may use it. (A look for lapsed rows runs beside the claims, so that a claimant whose
// first claim finds only lapsed rows then rescues one with the token it would have taken had it
// looked first.)
func (k *tokens) unspend(token time.Time) {
	n := token.UnixMicro()
	k.last.CompareAndSwap(n, n-1)
}
