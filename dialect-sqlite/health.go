package sqlite

import (
	"context"

	"github.com/settlehq/settle/core"
)

// CheckHealth reports whether the database file can be used (core.HealthChecker): a ping
// through the pool, bounded by ctx's deadline — pass "connected", or fail "unreachable" (a
// closed pool) with the error.
func (db *DB) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Name: "sqlite " + db.path, Status: core.HealthPass, State: "connected"}
	if err := db.pool.PingContext(ctx); err != nil {
		h.Status, h.State = core.HealthFail, "unreachable"
		h.Output, h.ErrorAt = err.Error(), db.clock.Now()
	}
	return h
}

var _ core.HealthChecker = (*DB)(nil)
