package lease

import (
	"errors"
	"strconv"
)

// ErrLeaseLost is matched (errors.Is) by the error of a lease-form settlement whose row no
// longer holds the delivery's lease (sqlqueue.ErrLeaseLost is this value).
var ErrLeaseLost = errors.New("sqlqueue: lease lost")

// LeaseLostError says which row lost its lease; it matches ErrLeaseLost.
type LeaseLostError struct {
	// Queue and Table name where the row lives.
	Queue, Table string
	// ID and Attempt identify the delivery.
	ID      int64
	Attempt int
}

func (e *LeaseLostError) Error() string {
	return "sqlqueue: queue " + strconv.Quote(e.Queue) + " on table " + e.Table + ": lease on row " +
		strconv.FormatInt(e.ID, 10) + " (attempt " + strconv.Itoa(e.Attempt) + ") ran out; another claim owns it"
}

// Is makes errors.Is(err, ErrLeaseLost) hold.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// ErrRowHeld is the error of a settlement whose row another session held locked
// (sqlqueue.ErrRowHeld is this value).
var ErrRowHeld = errors.New("sqlqueue: row locked by another session")

// RowHeldError is ErrRowHeld for one delivery.
type RowHeldError struct {
	// Queue and Table name where the row lives.
	Queue, Table string
	// ID and Attempt identify the delivery.
	ID      int64
	Attempt int
}

func (e *RowHeldError) Error() string {
	return "sqlqueue: queue " + strconv.Quote(e.Queue) + " on table " + e.Table + ": row " + strconv.FormatInt(e.ID, 10) +
		" (attempt " + strconv.Itoa(e.Attempt) + ") is locked by another session; the settlement is retried"
}

// Is reports ErrRowHeld.
func (e *RowHeldError) Is(target error) bool { return target == ErrRowHeld }
