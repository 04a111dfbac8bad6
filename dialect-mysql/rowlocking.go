package mysql

import (
	"strconv"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// InnoDB locks rows one by one, so a service's own SELECT … FOR UPDATE can hold a claimed row
// while the engine wants to write it: the dialect tells the engine how to lock rows without
// waiting on held ones, and how to bound the waits it cannot avoid (driver.RowLocking).
var _ driver.RowLocking = (*dialect)(nil)

// LockClause locks the rows a SELECT returns: FOR UPDATE, skipping the rows another
// transaction holds with skip (MySQL 8.0.1+, MariaDB 10.6+).
func (*dialect) LockClause(skip bool) string {
	if skip {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// LockTimeout sets innodb_lock_wait_timeout (whole seconds, rounded up, at least 1). InnoDB
// has no per-transaction value, so it is the session's in both cases. On MySQL a connection of
// the pool keeps the subscription's value after the engine's transaction, until the engine's
// next transaction on it sets it again. On MariaDB the engine's transactions do not send it:
// each later statement of the transaction carries it (SET STATEMENT … FOR, see txn), which
// saves a round trip per transaction and leaves the session's value alone.
func (*dialect) LockTimeout(d time.Duration, _ bool) string {
	s := max((d+time.Second-1)/time.Second, 1)
	return "SET SESSION innodb_lock_wait_timeout = " + strconv.FormatInt(int64(s), 10)
}
