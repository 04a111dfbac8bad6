package driver

import (
	"context"
)

// This file holds the capabilities about connections and the database as a whole: lost
// connections, wake-ups across processes, and a single writer.

// ConnLoss is an optional interface of a Dialect that tells a lost or refused connection (the
// server restarted, the network dropped, the server is not accepting connections yet) from
// other errors. On such an error a claim does not fail the subscription's Next (which would
// escalate core's backoff, up to seconds, while the server restarts): the engine replaces the
// connection, or waits for the server itself with a short backoff capped at ReconnectMax, and
// claims again as soon as it answers. Dedicated connections (advisory form) that went stale are
// replaced the same way.
type ConnLoss interface {
	// ConnLost reports whether err means the connection was lost or could not be made.
	ConnLost(err error) bool
}

// Notifier is an optional interface of a Dialect whose database can tell other processes that
// a queue has new rows (PostgreSQL LISTEN/NOTIFY). Publishing in one process always wakes that
// process's claimants; a Notifier extends that across processes.
type Notifier interface {
	// Notify announces new rows for the queue inside q (the publishing transaction or pool).
	Notify(ctx context.Context, q Queryer, queue QueueRef) error
	// Listen calls wake (which never blocks) whenever rows for the queue may be ready, until
	// stop is called.
	Listen(ctx context.Context, db DB, queue QueueRef, wake func()) (stop func(), err error)
}

// SingleWriter is an optional interface of a Dialect whose database runs one write transaction
// at a time (SQLite: a write transaction holds the whole file). Code that would keep several
// write transactions open at once, each waiting for the others (several row-lock claims of one
// subscription, which stay open while their handlers run), runs one at a time instead:
// sqlqueuetest runs such cases with one worker.
type SingleWriter interface {
	// SingleWriter reports whether the database has one writer at a time.
	SingleWriter() bool
}

// IsSingleWriter reports whether d declares one writer at a time.
func IsSingleWriter(d Dialect) bool {
	s, ok := d.(SingleWriter)
	return ok && s.SingleWriter()
}
