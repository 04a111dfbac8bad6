package postgres

import (
	"strconv"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// PostgreSQL locks rows one by one, so a service's own SELECT … FOR UPDATE can hold a claimed
// row while the engine wants to write it: the dialect tells the engine how to lock rows without
// waiting on held ones, and how to bound the waits it cannot avoid (driver.RowLocking).
var _ driver.RowLocking = (*dialect)(nil)

// LockClause locks the rows a SELECT returns: FOR UPDATE, skipping the rows another
// transaction holds with skip.
func (*dialect) LockClause(skip bool) string {
	if skip {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// LocksOnlyReturnedRows reports that FOR UPDATE locks only the rows a SELECT returns
// (driver.ReturnedRowLocks): the engine looks for lapsed rows beside its own claims.
func (*dialect) LocksOnlyReturnedRows() bool { return true }

var _ driver.ReturnedRowLocks = (*dialect)(nil)

// LockTimeout sets lock_timeout (in milliseconds, at least 1) for the current transaction
// (set_config with is_local, which also holds in the implicit transaction of a pipeline), or
// with session for the session.
func (*dialect) LockTimeout(d time.Duration, session bool) string {
	ms := strconv.FormatInt(int64(max((d+time.Millisecond-1)/time.Millisecond, 1)), 10)
	if session {
		return "SET lock_timeout = " + ms
	}
	return "SELECT set_config('lock_timeout', '" + ms + "', true)"
}
