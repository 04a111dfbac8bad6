package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core"
)

// listenerDown is why and since when a DB's LISTEN connection is lost.
type listenerDown struct {
	err error
	at  time.Time
}

// setDown records the listener's connection as lost with err, or restored (nil).
func (l *listener) setDown(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.down = nil
		return
	}
	if l.down == nil {
		l.down = &listenerDown{err: err, at: l.db.clock.Now()}
		return
	}
	l.down.err = err // keep since when
}

// lost reports the listener's loss, nil while it listens or does not run.
func (l *listener) lost() *listenerDown {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil || l.down == nil {
		return nil
	}
	d := *l.down
	return &d
}

// CheckHealth reports whether the database can be used (core.HealthChecker): a ping through
// the pool, bounded by ctx's deadline — pass "connected", or fail "unreachable" with the error.
// With Notify(true), a LISTEN connection that is down makes it warn ("listener down"):
// subscriptions still find their messages by polling, later.
func (db *DB) CheckHealth(ctx context.Context) core.ComponentHealth {
	cc := db.pool.Config().ConnConfig
	h := core.ComponentHealth{Name: fmt.Sprintf("postgres %s:%d/%s", cc.Host, cc.Port, cc.Database), Status: core.HealthPass, State: "connected"}
	if err := db.pool.Ping(ctx); err != nil {
		h.Status, h.State = core.HealthFail, "unreachable"
		h.Output, h.ErrorAt = edgeErr(err, nil).Error(), db.clock.Now()
	}
	if db.notify {
		if d := db.listener().lost(); d != nil {
			if h.Status == core.HealthPass {
				h.Status = core.HealthWarn
				h.Output, h.ErrorAt = "LISTEN connection: "+d.err.Error(), d.at
			}
			h.State += ", listener down"
		}
	}
	return h
}

var _ core.HealthChecker = (*DB)(nil)
