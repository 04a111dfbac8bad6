package core

import "time"

// Settlement describes one delivery's settlement, as observers see it.
type Settlement struct {
	// Subscription and Queue name where the delivery came from.
	Subscription, Queue string
	// Delivery is the settled delivery.
	Delivery Delivery
	// Verdict is what was performed.
	Verdict Verdict
	// Err is nil when the settlement is durable; otherwise the backend's error (the message
	// then returns as an abandoned one would). An Err matching ErrSettlementUnknown says the
	// settlement was sent and its confirmation lost: the message returns only if the server did
	// not apply it.
	Err error
	// At is when the settlement was reported, on the App's clock.
	At time.Time
}

// Observer is told of every settlement after it is durable or has failed. Observers run on the
// settling goroutine: they must be quick and must not block.
type Observer func(Settlement)
