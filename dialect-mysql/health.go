package mysql

import (
	"context"

	"github.com/settlehq/settle/core"
)

// CheckHealth reports whether the database can be used (core.HealthChecker): a ping through
// the pool, bounded by ctx's deadline — pass "connected", or fail "unreachable" with the error.
func (db *DB) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Name: db.dialect.Name() + " " + db.database, Status: core.HealthPass, State: "connected"}
	if err := db.pool.PingContext(ctx); err != nil {
		h.Status, h.State = core.HealthFail, "unreachable"
		h.Output, h.ErrorAt = edgeErr(err).Error(), db.clock.Now()
	}
	return h
}

var _ core.HealthChecker = (*DB)(nil)
