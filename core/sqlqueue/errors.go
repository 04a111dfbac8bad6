package sqlqueue

import (
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/lease"
)

// ErrLeaseLost is matched (errors.Is) by the error of a lease-form settlement whose row no
// longer holds the delivery's lease: the lease ran out and a later claim owns the row. The
// settlement changed nothing; the later claim settles the row.
var ErrLeaseLost = lease.ErrLeaseLost

// LeaseLostError says which row lost its lease (its Queue and Table, the row's ID and the
// delivery's Attempt); it matches ErrLeaseLost.
type LeaseLostError = lease.LeaseLostError

// ErrRowHeld is the error of a settlement whose row another session held locked: after a
// grouped settlement waited out the lock timeout, the rows that were free were settled and the
// held ones failed at once, without waiting again. Test for it with errors.Is.
var ErrRowHeld = lease.ErrRowHeld

// RowHeldError is ErrRowHeld for one delivery (its Queue and Table, the row's ID and the
// delivery's Attempt).
type RowHeldError = lease.RowHeldError

// SettlementError is what a row whose settlement failed records as its last error: the
// Verdict whose settlement failed, and Err, why.
type SettlementError = engine.SettlementError

// ErrNotTransactional is returned by Tx for a handler not mounted with Transactional().
var ErrNotTransactional = engine.ErrNotTransactional

// HeadersError is the header a delivery reports when its headers column is not a JSON object
// of strings.
const HeadersError = engine.HeadersError
