package redisq

import "errors"

var (
	// ErrLeaseLost is the settlement error of a delivery whose entry was claimed again (its lease
	// ran out and XAUTOCLAIM gave it to another delivery, in this process or another): the later
	// claim owns it, and the first delivery's outcome is not performed. The entry is settled by
	// the delivery that holds it now.
	ErrLeaseLost = errors.New("the entry was claimed again by a later delivery; its lease is lost")
	// ErrEntryGone is the settlement error of a retry, a delay or a dead letter of an entry that
	// was deleted from the stream while it was pending (XDEL or a trim by someone else): there is
	// nothing left to copy. The entry is acknowledged.
	ErrEntryGone = errors.New("the entry was deleted from the stream while pending")
)
