package lease

import (
	"context"
	"sync"

	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// lapsedLook runs a lease claimant's look for lapsed rows (rescue.go) in the background.
// (The row-lock form looks in line, between its claims: its counted claim marks rows in one
// transaction and locks them in the next, and a look beside it would take them for lapsed in
// between.) The look is one SELECT … LIMIT 1, but with a backlog and no lapsed row it reads
// the backlog's rows to find that out (on SQLite, 15 ms over 100,000 rows): run before a claim,
// it held up the claim, when a process starts and then at every look. In the background the
// claims go on meanwhile; the claim after the look ended acts on what it found (a rescue waits
// for the claimed rows to finish, as before), and a look that found a lapsed row wakes the
// claimant, so that one waiting for rows does not wait out its poll interval first.
//
// Nothing changes for the rows themselves: the ordinary claims never take a lapsed row (they
// take only rows no claim holds), so they may run before the rescue without touching it.
//
// On MySQL and MariaDB the look stays in line with the claims: it passes over rows another
// session holds locked, and InnoDB's claims lock every row they scan for the length of their
// transaction, lapsed ones included, so a look beside the claimant's own claim would pass over
// the very rows it looks for. A RowLocking dialect runs it beside the claims only when it says
// its locks cover only the rows a SELECT returns (ReturnedRowLocks: PostgreSQL).
type lapsedLook struct {
	inline  bool // run the look in the claimant's own call
	running bool // the claimant's own (Next is never called concurrently)
	done    chan lookResult
	wg      sync.WaitGroup
}

type lookResult struct {
	found bool
	err   error
}

// start runs look in the background (or in line), unless one is running; found wakes the
// claimant. A look in line has ended when start returns.
func (k *lapsedLook) start(ctx context.Context, rt *engine.Runtime, look func(context.Context) (bool, error)) {
	if k.running {
		return
	}
	if k.done == nil {
		k.done = make(chan lookResult, 1)
	}
	k.running = true
	if k.inline {
		found, err := look(ctx)
		k.done <- lookResult{found, err}
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		found, err := look(ctx)
		k.done <- lookResult{found, err}
		if found {
			rt.Wake.Notify()
		}
	}()
}

// result returns what the look found, once it has ended (looked false: none ended since the
// last call).
func (k *lapsedLook) result() (found, looked bool, err error) {
	if !k.running {
		return false, false, nil
	}
	select {
	case r := <-k.done:
		k.running = false
		return r.found, true, r.err
	default:
		return false, false, nil
	}
}

// wait waits for a look still running (Close: the database may close after).
func (k *lapsedLook) wait() { k.wg.Wait() }
