package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrConnLost is wrapped by the error of a statement, Begin, commit or rollback whose
// connection was closed under it (the backend was terminated, the server restarted, the
// network dropped), and of a connection the server refused or could not be reached for: the
// server rolled back whatever that connection's transaction had done and released its row and
// advisory locks, so a claim gave its rows back and a settlement did not happen; the rows come
// back to a later claim.
var ErrConnLost = errors.New("postgres: connection lost; the server rolled back its transaction and released its locks")

// edgeErr translates a pgx error at the module edge (every statement, Begin, Commit, Rollback
// and connection the adapters hand out passes through it): closed (nil for the pool) reports whether
// the connection the statement ran on is closed now; it is asked only after an error, while
// the connection is still the caller's.
func edgeErr(err error, closed closedFunc) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	var ne net.Error
	lost := errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		(errors.As(err, &pe) && (pe.Code == codeAdminShutdown || pe.Code == codeCrashShutdown || pe.Code == codeCannotConnectNow))
	if lost || (closed != nil && closed()) {
		return fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	return err
}

// SQLSTATE codes after which the same work can succeed if it is simply tried again.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeAdminShutdown        = "57P01"
	codeCannotConnectNow     = "57P03"
	codeCrashShutdown        = "57P02"
	codeDivisionByZero       = "22012" // a pipelined step's row count check (conn.go)
)

// IsTransient reports whether err is a PostgreSQL error after which the same work can succeed if
// it is tried again: a serialization failure or deadlock (the transaction was rolled back), a
// lock that was not available, a server shutting down or starting, or a statement pgx never
// sent (pgconn.SafeToRetry). A handler that meets one returns core.Retry() (or RetryAfter)
// rather than failing for good; the delivery's own transaction, in transactional mode, is
// rolled back by that outcome.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable, codeAdminShutdown, codeCannotConnectNow:
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}
