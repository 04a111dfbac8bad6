package sqlqueue

import (
	"errors"

	"github.com/settlehq/settle/core"
)

// PublishPropagator writes the trace context of each Publish's context into the message's
// headers with p (a table with a headers column only). Without it the publisher uses the
// propagator the context carries: an App's handlers carry their App's (core.WithPropagator).
// (Deliveries tell telemetry when their row was published, core.Enqueued, and which system the
// database is, core.MessagingSystem.)
func PublishPropagator(p core.Propagator) PublisherOption {
	return func(pub *Publisher) error {
		if p == nil {
			return errors.New("sqlqueue.PublishPropagator(nil): no propagator")
		}
		pub.prop = p
		return nil
	}
}
