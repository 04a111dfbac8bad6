package sqlqueue

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
)

// ReconnectMax bounds how long a claimant waits between two tries after a lost connection
// (ConnLoss): it claims again at most this long after the server accepts connections.
const ReconnectMax = 250 * time.Millisecond

// reconnectMin is the first wait after a lost connection.
const reconnectMin = 25 * time.Millisecond

// outage is a claimant's state while its database does not answer.
type outage struct {
	tries  int
	since  time.Time
	logged time.Time
	wait   time.Duration
}

// connLost reports whether err is a lost or refused connection, by the dialect's word.
func (rt *runtime) connLost(err error) bool {
	cl, ok := rt.d.(ConnLoss)
	return ok && err != nil && cl.ConnLost(err)
}

// awaitServer is what a claimant does instead of failing Next after a lost connection: it
// waits a short, doubling backoff capped at ReconnectMax (or until a publish in this process
// shows the server answers), logging the outage once per FailureLogInterval, and returns so
// that the claim runs again. It returns ctx's error when the subscription stops meanwhile.
func (rt *runtime) awaitServer(ctx context.Context, o *outage, err error) error {
	now := rt.clock.Now()
	if o.tries == 0 {
		o.since, o.wait = now, reconnectMin
		if rt.sub.Report != nil {
			rt.sub.Report(core.Event{Kind: core.EventSourceFailed, Err: err})
		}
	} else {
		o.wait = min(2*o.wait, ReconnectMax)
	}
	o.tries++
	if o.logged.IsZero() || now.Sub(o.logged) >= FailureLogInterval {
		o.logged = now
		rt.log.Warn("sqlqueue: the database connection is lost; claiming again as soon as the server answers",
			"queue", rt.q.name, "down_for", now.Sub(o.since), "tries", o.tries, "error", err)
	}
	woken := rt.wake.wait()
	t := rt.clock.NewTimer(o.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-t.C():
	}
	return nil
}

// serverBack ends an outage once a claim went through.
func (rt *runtime) serverBack(o *outage) {
	if o.tries == 0 {
		return
	}
	rt.log.Info("sqlqueue: the database answers again; claiming", "queue", rt.q.name, "down_for", rt.clock.Now().Sub(o.since), "tries", o.tries)
	if rt.sub.Report != nil {
		rt.sub.Report(core.Event{Kind: core.EventReconnected})
	}
	*o = outage{}
}
