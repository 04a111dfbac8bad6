package ops

import (
	"context"
	"time"
)

// Queue is the operations view of one queue and its dead letter: how deep it is, and what
// lies in its dead letter. Every backend implements it (sqlqueue.NewOps for the SQL tables of
// every dialect, amqp.NewOps for RabbitMQ, natsjs.NewOps for JetStream); the settle command
// and its web console work through it alone.
//
// Methods that change the backend (Redrive, Purge) act on a Selection, which must name dead
// letters explicitly: a list of ids, a non-empty Filter, or All.
type Queue interface {
	// Stats measures the queue's depth by state and the age of its oldest ready message.
	Stats(ctx context.Context) (Stats, error)
	// ListDead returns one page of the dead letters matching f, oldest first.
	ListDead(ctx context.Context, f Filter, p Page) (DeadPage, error)
	// GetDead returns one dead letter by id; an unknown id gives a *NotFoundError.
	GetDead(ctx context.Context, id string) (DeadLetter, error)
	// Redrive moves the selected dead letters back to the queue they came from (the queue
	// recorded in their settle-origin header, or this queue when none is recorded) and
	// returns how many it moved. Their attempt count starts again from zero unless
	// o.KeepAttempts. A selection of ids that names an unknown dead letter changes nothing
	// and gives a *NotFoundError.
	Redrive(ctx context.Context, s Selection, o RedriveOptions) (int, error)
	// Purge deletes the selected dead letters for good and returns how many it deleted. A
	// selection of ids that names an unknown dead letter changes nothing and gives a
	// *NotFoundError.
	Purge(ctx context.Context, s Selection) (int, error)
}

// Stats is a queue's depth by state, measured at At.
type Stats struct {
	// Queue names the queue (an SQL group or table, a RabbitMQ queue, a JetStream subject).
	Queue string `json:"queue"`
	// DeadLetter names its dead letter; "" when the target names none (Dead is then 0).
	DeadLetter string `json:"dead_letter,omitempty"`
	// Ready counts messages a consumer may take now.
	Ready int64 `json:"ready"`
	// Delayed counts messages held back until a later time (a RetryAfter, a delayed publish).
	Delayed int64 `json:"delayed"`
	// InFlight counts messages a consumer holds and has not settled.
	InFlight int64 `json:"in_flight"`
	// Dead counts the dead letters.
	Dead int64 `json:"dead"`
	// DeadLettering counts messages the server is moving to a dead letter and has not
	// delivered there yet: still in the queue, neither ready nor in flight, invisible to
	// consumers (a RabbitMQ quorum queue dead-lettering at-least-once while its destination is
	// full or missing). 0 where a backend has no such state.
	DeadLettering int64 `json:"dead_lettering"`
	// OldestReady is the age of the oldest ready message at At; zero when none is ready.
	OldestReady time.Duration `json:"oldest_ready_ns"`
	// Stranded counts messages the backend still holds for the queue that its consumer will
	// never deliver again: a JetStream work-queue stream's messages at or below its consumer's
	// ack floor, left there by a server crash that lost their removal, or by MaxDeliver. The
	// backend's repair moves them (the settle command's "stranded"). Only JetStream strands
	// messages; the other backends report 0.
	Stranded int64 `json:"stranded,omitempty"`
	// At is when the figures were taken.
	At time.Time `json:"at"`
	// Unmeasured lists the figures this backend could not take, each with why; their fields
	// above are zero and must not be read as "none".
	Unmeasured []Unmeasured `json:"unmeasured,omitempty"`
}

// Figure names one figure of Stats.
type Figure string

// The figures of Stats.
const (
	FigureReady       Figure = "ready"
	FigureDelayed     Figure = "delayed"
	FigureInFlight    Figure = "in_flight"
	FigureDead        Figure = "dead"
	FigureOldestReady Figure = "oldest_ready"
	FigureStranded    Figure = "stranded"
	// FigureDeadLettering is Stats.DeadLettering.
	FigureDeadLettering Figure = "dead_lettering"
)

// Unmeasured is a figure a backend cannot take, and why.
type Unmeasured struct {
	Figure Figure `json:"figure"`
	Why    string `json:"why"`
}

// Measured reports whether figure f was taken.
func (s Stats) Measured(f Figure) bool {
	for _, u := range s.Unmeasured {
		if u.Figure == f {
			return false
		}
	}
	return true
}

// DeadLetter is one message in a dead letter, with why it died as its backend recorded it
// (core.DeadLetterInfo: the settle-* headers, or a SQL table's last_error column).
type DeadLetter struct {
	// ID identifies the dead letter within its dead letter: a row id on SQL, the message id on
	// RabbitMQ (or a digest of the message when it has none), the stream sequence on JetStream.
	ID string `json:"id"`
	// Payload is the message body.
	Payload []byte `json:"payload"`
	// Headers are the message's headers, the dead-letter headers included.
	Headers map[string]string `json:"headers,omitempty"`
	// Count is how many deliveries the message had; 0 when not recorded.
	Count int `json:"count"`
	// Origin is the queue it came from; "" when not recorded.
	Origin string `json:"origin,omitempty"`
	// DeadAt is when it was moved; zero when not recorded.
	DeadAt time.Time `json:"dead_at"`
	// Reason is its last failure; "" when not recorded.
	Reason string `json:"reason,omitempty"`
	// Created is when the message was first published, where the backend records it.
	Created time.Time `json:"created"`
}

// Page asks for one page of a listing.
type Page struct {
	// Limit is the most dead letters to return; 0 means DefaultLimit.
	Limit int
	// After continues a listing where an earlier page ended: that page's DeadPage.Next, an
	// opaque cursor ("" starts at the oldest).
	After string
}

// DefaultLimit is the page size when Page.Limit is 0.
const DefaultLimit = 50

// DeadPage is one page of a dead-letter listing.
type DeadPage struct {
	// Items are the dead letters, oldest first.
	Items []DeadLetter `json:"items"`
	// Next continues the listing (Page.After); "" when this was the last page.
	Next string `json:"next,omitempty"`
}

// RedriveOptions change how Redrive moves dead letters back.
type RedriveOptions struct {
	// KeepAttempts keeps each message's attempt count, so the cap still counts its earlier
	// deliveries: a message that reached its cap goes back to the dead letter at its next
	// delivery. By default the count starts again from zero.
	KeepAttempts bool
	// Moved, when set, is called from Redrive's goroutine after each step that moved dead
	// letters for good (a committed batch, a confirmed and acknowledged message) with their ids:
	// progress for a long redrive.
	Moved func(ids []string)
}

// LimitOf returns p's limit, DefaultLimit when it is 0.
func (p Page) LimitOf() int {
	if p.Limit <= 0 {
		return DefaultLimit
	}
	return p.Limit
}
