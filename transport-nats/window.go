package natsjs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// The fetch window (slow start).
//
// JetStream counts every delivery (NumDelivered), handled or not: when a process dies, every
// message it had fetched comes back after its AckWait with one more delivery counted. With a
// fetch of the whole batch, a poison message that kills the process charges each message fetched
// beside it, and those come due again together, so the next fetch takes them together again;
// after a few crashes settle's cap at claim dead-letters innocent neighbours as "not settled".
//
// So a subscription fetches one message at a time (the window) while suspect messages may be
// coming: for one AckWait after it starts, when the consumer had unacknowledged messages then (a
// predecessor's, perhaps a crashed one's, or another instance's), and for one AckWait after each
// suspect delivery (a crash's messages come due together). After such a stretch the window
// doubles each time as many clean deliveries (not suspect) as it holds have settled, up to the
// batch (FetchBatch, or the automatic fetch size's ceiling: fetchsize.go); a start with nothing
// unacknowledged fetches the whole batch at once (the automatic size starts at the worker
// count). Fetching one message still lets every free worker fetch its own: the window bounds
// what waits fetched beside the handlers, not how many handlers run. A suspect delivery runs
// alone: core runs it with no
// other handler beside it (core.Suspect), and Next hands out nothing else, and fetches nothing,
// until it has been settled (the gate), so the deliveries fetched with it are the only ones its
// crash can charge — none in a quiet stretch, where fetches take one message.
type window struct {
	mu    sync.Mutex
	clk   clock.Clock
	lease time.Duration
	max   int
	size  int
	clean int
	quiet time.Time   // the window stays at one until then
	full  atomic.Bool // size == max: settledClean has nothing to count (no lock per settlement)
}

func newWindow(clk clock.Clock, lease time.Duration, max int, pending bool) *window {
	w := &window{clk: clk, lease: lease, max: max, size: max}
	if pending {
		w.size, w.quiet = 1, clk.Now().Add(lease)
	}
	w.full.Store(w.size >= w.max)
	return w
}

// batch is how many messages the next fetch asks for.
func (w *window) batch() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// suspect brings the window back to one for an AckWait.
func (w *window) suspect() {
	w.mu.Lock()
	w.size, w.clean = 1, 0
	w.quiet = w.clk.Now().Add(w.lease)
	w.full.Store(w.size >= w.max)
	w.mu.Unlock()
}

// settledClean counts a clean delivery settled by its handler's outcome, and widens the window
// when a window's worth has settled outside a quiet stretch.
func (w *window) settledClean() {
	if w.full.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size >= w.max || w.clk.Now().Before(w.quiet) {
		return
	}
	w.clean++
	if w.clean >= w.size {
		w.size, w.clean = min(w.size*2, w.max), 0
		w.full.Store(w.size >= w.max)
	}
}

// gate holds Next while a suspect delivery it handed out is unsettled.
type gate struct {
	mu   sync.Mutex
	d    *Delivery
	open chan struct{} // closed when d is settled
	shut atomic.Bool   // d != nil: wait and release take the lock only then
}

// wait returns the channel to wait on, nil when no suspect delivery is out.
func (g *gate) wait() <-chan struct{} {
	if !g.shut.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.d == nil {
		return nil
	}
	return g.open
}

// hold closes the gate behind d.
func (g *gate) hold(d *Delivery) {
	g.mu.Lock()
	g.d, g.open = d, make(chan struct{})
	g.shut.Store(true)
	g.mu.Unlock()
}

// release opens the gate if d holds it.
func (g *gate) release(d *Delivery) {
	if !g.shut.Load() {
		return
	}
	g.mu.Lock()
	if g.d != nil && (d == nil || g.d == d) {
		close(g.open)
		g.d, g.open = nil, nil
		g.shut.Store(false)
	}
	g.mu.Unlock()
}
