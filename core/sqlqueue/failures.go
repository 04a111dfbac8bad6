package sqlqueue

import "github.com/settlehq/settle/core/sqlqueue/internal/engine"

// A settlement can fail while the handler succeeded (a custom event that errors, a trigger that
// refuses the dialect's statement, a row lock held past the lock timeout). Each such row is then
// held back for a backoff on the App's clock that doubles with each consecutive failure of that
// row (see the package doc), and a claimant that meets a lost connection waits for the server.
const (
	// FailureBackoff is how long a row whose settlement failed is held back the first time.
	FailureBackoff = engine.FailureBackoff
	// FailureBackoffMax bounds the doubling backoff of a row whose settlement keeps failing.
	FailureBackoffMax = engine.FailureBackoffMax
	// FailureLogInterval is the least time between two log lines about failing settlements.
	FailureLogInterval = engine.FailureLogInterval
	// ReconnectMax bounds how long a claimant waits between two tries after a lost connection
	// (driver.ConnLoss): it claims again at most this long after the server accepts
	// connections.
	ReconnectMax = engine.ReconnectMax
)
