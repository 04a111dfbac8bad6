package engine

import (
	"context"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// ReconnectMax bounds how long a claimant waits between two tries after a lost connection
// (ConnLoss): it claims again at most this long after the server accepts connections.
const ReconnectMax = 250 * time.Millisecond

// reconnectMin is the first wait after a lost connection.
const reconnectMin = 25 * time.Millisecond

// Outage is a claimant's state while its database does not answer.
type Outage struct {
	tries  int
	since  time.Time
	logged time.Time
	wait   time.Duration
}

// ConnLost reports whether err is a lost or refused connection, by the dialect's word.
func (rt *Runtime) ConnLost(err error) bool {
	cl, ok := rt.D.(driver.ConnLoss)
	return ok && err != nil && cl.ConnLost(err)
}

// AwaitServer is what a claimant does instead of failing Next after a lost connection: it
// waits a short, doubling backoff capped at ReconnectMax (or until a publish in this process
// shows the server answers), logging the outage once per FailureLogInterval, and returns so
// that the claim runs again. It returns ctx's error when the subscription stops meanwhile.
func (rt *Runtime) AwaitServer(ctx context.Context, o *Outage, err error) error {
	now := rt.Clock.Now()
	if o.tries == 0 {
		o.since, o.wait = now, reconnectMin
		if rt.Sub.Report != nil {
			rt.Sub.Report(core.Event{Kind: core.EventSourceFailed, Err: err})
		}
	} else {
		o.wait = min(2*o.wait, ReconnectMax)
	}
	o.tries++
	if o.logged.IsZero() || now.Sub(o.logged) >= FailureLogInterval {
		o.logged = now
		rt.Log.Warn("sqlqueue: the database connection is lost; claiming again as soon as the server answers",
			"queue", rt.Q.Name, "down_for", now.Sub(o.since), "tries", o.tries, "error", err)
	}
	woken := rt.Wake.Wait()
	t := rt.Clock.NewTimer(o.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-t.C():
	}
	return nil
}

// ServerBack ends an outage once a claim went through.
func (rt *Runtime) ServerBack(o *Outage) {
	if o.tries == 0 {
		return
	}
	rt.Log.Info("sqlqueue: the database answers again; claiming", "queue", rt.Q.Name, "down_for", rt.Clock.Now().Sub(o.since), "tries", o.tries)
	if rt.Sub.Report != nil {
		rt.Sub.Report(core.Event{Kind: core.EventReconnected})
	}
	*o = Outage{}
}
