package coretest_test

import (
	"context"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/transporttest"
)

// memBackend adapts the in-memory Broker to the conformance suite. The broker outlives the
// Apps of a test, so it is registered through a wrapper whose Close leaves it open.
type memBackend struct {
	b *coretest.Broker
	// viaCore hides the targets' identity from the broker's finisher, so that replies take
	// core's own path (published before the ack) instead of the broker's atomic one.
	viaCore bool
}

type keepOpen struct{}

func (keepOpen) Close() error { return nil }

func (m memBackend) Register(app *core.App)              { app.Register(keepOpen{}) }
func (m memBackend) Endpoint(queue string) core.Endpoint { return m.b.Queue(queue) }
func (m memBackend) Publish(_ context.Context, queue string, body []byte, headers map[string]string) error {
	m.b.Publish(queue, body, headers)
	return nil
}

// Target makes the broker's queues publish targets (transporttest.Targeter).
func (m memBackend) Target(queue string) core.Target {
	if m.viaCore {
		return foreignTarget{m.b.Queue(queue)}
	}
	return m.b.Queue(queue)
}

// foreignTarget is a queue of the broker that its finisher does not recognise as its own.
type foreignTarget struct{ core.Target }

func (m memBackend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	var out []transporttest.Message
	for _, s := range m.b.Drain(queue) {
		out = append(out, transporttest.Message{Body: s.Body, Headers: s.Headers, Count: s.Attempt})
	}
	return out, nil
}

// everything: the in-memory broker honours every publish option.
var everything = transporttest.PublishFeatures{
	MessageID: transporttest.Supported, Headers: transporttest.Supported, CorrelationID: transporttest.Supported,
	OrderingKey: transporttest.Supported, NotBefore: transporttest.Supported, Dedup: transporttest.Supported,
	Priority: transporttest.Supported, Replies: transporttest.Supported,
}

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name    string
		viaCore bool
	}{{"atomic-replies", false}, {"core-replies", true}} {
		t.Run(c.name, func(t *testing.T) {
			transporttest.Run(t, func(t *testing.T) transporttest.Env {
				v := clock.NewVirtual(coretest.Epoch)
				b := coretest.NewBroker(v, nil)
				t.Cleanup(func() { b.Close() })
				return transporttest.Env{Backend: memBackend{b: b, viaCore: c.viaCore}, Clock: v, Virtual: v, LeakCheck: leakCheck,
					Features: transporttest.Features{Publish: everything, Batch: transporttest.Supported, Ordered: transporttest.Supported}}
			})
		})
	}
}

// refusingBatches is the in-memory backend with endpoints that refuse batch subscriptions, as a
// backend that cannot run them does: the suite's Batch section then proves the refusal.
type refusingBatches struct{ memBackend }

func (r refusingBatches) Endpoint(queue string) core.Endpoint {
	return batchRefuser{r.b.Queue(queue)}
}

type batchRefuser struct{ *coretest.Endpoint }

func (e batchRefuser) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	if sub.Options.BatchSize > 0 {
		return nil, nil, &core.UnsupportedError{Option: "core.SubscribeBatch", Backend: "in-memory queue " + e.Queue(), Instead: "use core.Subscribe"}
	}
	return e.Endpoint.Open(ctx, sub)
}

func TestConformanceBatchRefused(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Env {
		v := clock.NewVirtual(coretest.Epoch)
		b := coretest.NewBroker(v, nil)
		t.Cleanup(func() { b.Close() })
		return transporttest.Env{Backend: refusingBatches{memBackend{b: b}}, Clock: v, Virtual: v, LeakCheck: leakCheck,
			Features: transporttest.Features{Batch: transporttest.Refused}}
	})
}
