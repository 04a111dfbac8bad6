package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Lease returns the lease-form endpoint of a queue on db: table t (t.Schema names a
// PostgreSQL schema; empty means the search_path) and, in a table with a group column, the
// queue's group ("" otherwise). The claim stamps locked_until and attempt + 1 on up to a batch
// of ready rows in one UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING and
// commits, so a long handler holds no transaction; every finishing statement is fenced by the
// delivery's token (locked_until), and one that finds another token reports
// sqlqueue.ErrLeaseLost.
func Lease(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	if err := checkTable(db, t); err != nil {
		return nil, err
	}
	return sqlqueue.NewLease(db.dialect.(driver.LeaseDialect), db.adapter, t, group)
}

// RowLock returns the row-lock-form endpoint of a queue on db (see Lease for t and group).
// The claim selects ready rows FOR UPDATE SKIP LOCKED in a transaction that stays open until
// they are settled; the finishing statements run in it and its commit is the settlement, so
// the rows of a crashed process come back the moment its connection closes.
func RowLock(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	if err := checkTable(db, t); err != nil {
		return nil, err
	}
	return sqlqueue.NewRowLock(db.dialect.(driver.RowLockDialect), db.adapter, t, group)
}

// Advisory returns the advisory-lock-form endpoint of a queue on db (see Lease for t and
// group). Each row is held by pg_try_advisory_lock on a key computed from its key expression
// (sqlqueue.AdvisoryKey; default the id) through the DB's AdvisoryKeyFunc, on a connection
// reserved for the delivery; the finishing statement commits on that connection and the key
// is unlocked after it, also when it failed. An unlock that is not confirmed closes the
// connection, so a connection holding a lock never returns to the pool. Rows sharing a key
// are worked one at a time, across processes.
//
// Each advisory subscription keeps one pool connection per worker for as long as it runs,
// and needs one more for its candidate queries: Open refuses a subscription whose connections,
// with those of the DB's other advisory subscriptions, would leave the pool nothing to look
// for rows with (it would wait for a connection forever), and names the pool size it needs.
func Advisory(db *DB, t sqlqueue.Table, group string) (core.Endpoint, error) {
	if err := checkTable(db, t); err != nil {
		return nil, err
	}
	ep, err := sqlqueue.NewAdvisory(db.dialect.(driver.AdvisoryDialect), db.adapter, t, group)
	if err != nil {
		return nil, err
	}
	return &advisoryEndpoint{Endpoint: ep, db: db}, nil
}

// advisoryEndpoint reserves the subscription's dedicated connections in the DB's count.
type advisoryEndpoint struct {
	core.Endpoint
	db *DB
}

func (a *advisoryEndpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	n := max(sub.Options.Workers, 1)
	if err := a.db.reserve(sub.Name, n); err != nil {
		return nil, nil, err
	}
	src, fin, err := a.Endpoint.Open(ctx, sub)
	if err != nil {
		a.db.unreserve(n)
		return nil, nil, err
	}
	return &reservedSource{Source: src, db: a.db, n: n}, fin, nil
}

// reservedSource gives the reservation back when the subscription's source closes.
type reservedSource struct {
	core.Source
	db   *DB
	n    int
	once sync.Once
}

func (r *reservedSource) Close() error {
	err := r.Source.Close()
	r.once.Do(func() { r.db.unreserve(r.n) })
	return err
}

// checkTable refuses a nil DB; names over PostgreSQL's identifier limit, which the server
// would truncate, are refused by the engine (MaxIdentifier).
func checkTable(db *DB, t sqlqueue.Table) error {
	if db == nil {
		return fmt.Errorf("postgres: queue on table %s: nil DB", t.Ref())
	}
	return nil
}
