// Package rowlock is the row-lock claim form of settle's SQL queue engine: a claim selects ready
// rows FOR UPDATE SKIP LOCKED in a transaction that stays open while their handlers run, each
// delivery's finishing statement runs in it, and its commit settles them all. The path of one
// delivery:
//
//	source.go      Next hands out the rows of the open claims; Finish settles into the claim
//	claimer.go     a claim, its size, and what it takes (count.go: counting at claim)
//	ahead.go       the next claim, made while the workers handle this one
//	batch.go       one claim's transaction: its settlements, grouped acks and drops, its commit
//	rescue.go      the rescue of rows whose counted claim lapsed
//	statements.go  the form's statements, over the ones every form shares (internal/engine)
package rowlock
