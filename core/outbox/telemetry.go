package outbox

import (
	"context"
	"errors"
	"slices"

	"github.com/settlehq/settle/core"
)

// WithPropagator records the trace context of Record's context in each record's headers with
// p, so that the relayed message carries the trace of the transaction that wrote it, not the
// relay's. Without it the propagator the context carries is used (an App's handlers carry
// their App's: core.WithPropagator). A table without a headers column records none.
func WithPropagator(p core.Propagator) Option {
	return func(o *Outbox) error {
		if p == nil {
			return errors.New("outbox.WithPropagator(nil): no propagator")
		}
		o.prop = p
		return nil
	}
}

// traced returns msgs with ctx's trace context in their headers: a copy when anything is
// added, the caller's slice and maps untouched.
func (o *Outbox) traced(ctx context.Context, msgs []Message) []Message {
	if o.t.Columns.Headers == "" || (o.prop == nil && core.PropagatorFrom(ctx) == nil) {
		return msgs
	}
	msgs = slices.Clone(msgs)
	for i := range msgs {
		msgs[i].Headers = core.InjectHeaders(ctx, o.prop, msgs[i].Headers)
	}
	return msgs
}
