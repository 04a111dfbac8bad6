package periodic

import (
	"context"
	"time"
)

// Claimer decides which process publishes a tick: every running scheduler asks it for every
// tick of every job, and exactly one of them wins. The decision is the backend's (a unique key
// in a database, a key-value create), never a clock's.
type Claimer interface {
	// ClaimTick reports whether the caller won tick of schedule: true for exactly one caller
	// across all processes, however many ask and however often.
	ClaimTick(ctx context.Context, schedule string, tick time.Time) (won bool, err error)
}

// HoldingClaimer is an optional interface of a Claimer that can keep a claim pending while the
// tick is published: the claim takes effect when the returned finish is called with true, and
// is released with false, or when the process dies, so that a process still asking gets it.
// The scheduler uses it instead of ClaimTick, so that a process dying between its claim and
// its publish does not lose the tick.
type HoldingClaimer interface {
	Claimer
	// HoldTick claims tick like ClaimTick; when won, finish(true) makes the claim final and
	// finish(false) gives it up. finish is nil when the tick is lost.
	HoldTick(ctx context.Context, schedule string, tick time.Time) (won bool, finish func(ctx context.Context, keep bool) error, err error)
}

// Pruner is an optional interface of a Claimer that keeps claims: the scheduler asks it, once
// an hour, to forget claims of ticks before a time (Retain).
type Pruner interface {
	PruneTicks(ctx context.Context, before time.Time) (int64, error)
}

// TargetDedup is the Claimer for a target that deduplicates by itself: every process wins every
// tick, and each job publishes each tick with core.DedupKey (as well as core.MessageID) of its
// tick's name, so that the target keeps one message per tick. This holds only as long as the
// target remembers the key (the JetStream duplicate window, a SQL queue's pending dedup key:
// while the message is pending); a target that does not deduplicate refuses core.DedupKey and
// the job logs every refused publish.
var TargetDedup Claimer = targetDedup{}

type targetDedup struct{}

func (targetDedup) ClaimTick(context.Context, string, time.Time) (bool, error) { return true, nil }

// TickID names a tick of a schedule: the job's name, "@", and the tick in UTC (RFC 3339, to the
// second). It is the message id and dedup key of the tick's message, and the key of its claim.
func TickID(schedule string, tick time.Time) string {
	return schedule + "@" + tickText(tick)
}

// tickFormat orders as the ticks do (fixed width, UTC).
const tickFormat = "2006-01-02T15:04:05Z"

func tickText(t time.Time) string { return t.UTC().Format(tickFormat) }
