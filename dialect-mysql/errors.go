package mysql

import (
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"

	driver "github.com/go-sql-driver/mysql"
)

// ErrUnsupportedServer is returned (wrapped, with the version) when the server is older than
// MySQL 8.0.1 or MariaDB 10.6.
var ErrUnsupportedServer = errors.New("mysql: unsupported server version")

// ErrConnLost is wrapped by the error of a statement, Begin, commit or rollback whose connection
// the server closed (killed, restarted, timed out) under it, or that could not reach it: whatever the transaction had done was rolled
// back by the server, so a claim returns its rows and a settlement did not happen; the rows
// come back to a later claim.
var ErrConnLost = errors.New("mysql: connection lost; the server rolled back its transaction")

// edgeErr translates a driver error at the module edge: every statement, Begin, Commit,
// Rollback and connection the adapters hand out passes through it.
func edgeErr(err error) error {
	if err == nil {
		return nil
	}
	var me *driver.MySQLError
	lost := errors.Is(err, driver.ErrInvalidConn) || errors.Is(err, sqldriver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
	if ne := net.Error(nil); errors.As(err, &ne) {
		lost = true
	}
	if errors.As(err, &me) {
		switch me.Number {
		case errServerShutdown, errConnectionKilled, errClientInteractionTimeout:
			lost = true
		}
	}
	if lost {
		return fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	return err
}

// Server error numbers the dialect reacts to.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: the statement waited too long for a row lock
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK: InnoDB chose this transaction as the deadlock victim

	errServerShutdown           = 1053 // ER_SERVER_SHUTDOWN: the server is shutting down
	errConnectionKilled         = 1927 // ER_CONNECTION_KILLED (MariaDB): KILL ended the session
	errClientInteractionTimeout = 4031 // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8): wait_timeout ended the session
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
