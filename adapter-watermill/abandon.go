package settlewatermill

import (
	"context"
	"errors"

	"github.com/settlehq/settle/core"
)

// abandoning opens its endpoint with a Finisher that gives back, unsettled, every message whose
// consumer never acked or nacked it (the handler returned errAbandoned): core would otherwise
// take it for a failure and charge a retry, or a dead letter at the cap. Its Source takes nothing
// more once the subscription is ending (done): core stops pulling only when it sees its context
// end, and a worker that comes back from abandoning a message before that would claim it again
// (a claim counts an attempt) just to give it back at close. Everything else — the claim form,
// cap, dead letter — is the endpoint's own.
type abandoning struct {
	core.Endpoint
	done <-chan struct{} // closed when the subscription ends
}

func (a abandoning) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	src, fin, err := a.Endpoint.Open(ctx, sub)
	if err != nil {
		return nil, nil, err
	}
	src = endingSource{Source: src, done: a.done}
	if dh, ok := fin.(core.DelayHolder); ok {
		return src, abandonHolder{abandonFinisher{fin}, dh}, nil
	}
	return src, abandonFinisher{fin}, nil
}

// endingSource waits for core to stop pulling instead of taking a delivery once the
// subscription is ending.
type endingSource struct {
	core.Source
	done <-chan struct{}
}

func (s endingSource) Next(ctx context.Context) (core.Delivery, error) {
	select {
	case <-s.done:
		<-ctx.Done() // core cancels it as soon as it sees the subscription's end
		return nil, ctx.Err()
	default:
	}
	return s.Source.Next(ctx)
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
