package mysql

import (
	sqldriver "database/sql/driver"
	"errors"
	"fmt"

	driver "github.com/go-sql-driver/mysql"
)

// ErrUnsupportedServer is returned (wrapped, with the version) when the server is older than
// MySQL 8.0.1 or MariaDB 10.6.
var ErrUnsupportedServer = errors.New("mysql: unsupported server version")

// ErrConnLost is wrapped by the error of a statement or commit whose connection the server
// closed (killed, restarted, timed out) under it: whatever the transaction had done was rolled
// back by the server, so a claim returns its rows and a settlement did not happen; the rows
// come back to a later claim.
var ErrConnLost = errors.New("mysql: connection lost; the server rolled back its transaction")

// edgeErr translates a driver error at the module edge.
func edgeErr(err error) error {
	if err != nil && (errors.Is(err, driver.ErrInvalidConn) || errors.Is(err, sqldriver.ErrBadConn)) {
		return fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	return err
}

// Server error numbers the dialect reacts to.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: the statement waited too long for a row lock
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK: InnoDB chose this transaction as the deadlock victim
)

// IsTransient reports whether err is a deadlock (1213) or a lock wait timeout (1205): the
// statement lost a race for row locks, the server rolled back the statement or the whole
// transaction, and running the transaction again from its start is the cure. Claims that fail
// this way are retried, never reported to a handler.
func IsTransient(err error) bool {
	var me *driver.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == errDeadlock || me.Number == errLockWaitTimeout
}
