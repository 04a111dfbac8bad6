package settlewatermill

import (
	"context"
	"errors"

	"github.com/settlehq/settle/core"
)

// abandoning opens its endpoint with a Finisher that gives back, unsettled, every message whose
// consumer never acked or nacked it (the handler returned errAbandoned): core would otherwise
// take it for a failure and charge a retry, or a dead letter at the cap. Everything else —
// source, claim form, cap, dead letter — is the endpoint's own.
type abandoning struct{ core.Endpoint }

func (a abandoning) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := a.Endpoint.Open(ctx, sub)
	if err != nil {
		return nil, nil, err
	}
	if dh, ok := fin.(core.DelayHolder); ok {
		return src, abandonHolder{abandonFinisher{fin}, dh}, nil
	}
	return src, abandonFinisher{fin}, nil
}

type abandonFinisher struct{ fin core.Finisher }

func (f abandonFinisher) Finish(ctx context.Context, d core.Delivery, v core.Verdict, settled core.Settled) {
	if errors.Is(v.Cause, errAbandoned) {
		v = core.Verdict{Action: core.ActAbandon, Cause: errAbandoned}
	}
	f.fin.Finish(ctx, d, v, settled)
}

// abandonHolder keeps the endpoint's answer to core.DelayHolder, which decides whether a
// Backoff policy may delay.
type abandonHolder struct {
	abandonFinisher
	dh core.DelayHolder
}

func (h abandonHolder) HoldsDelays() bool { return h.dh.HoldsDelays() }
