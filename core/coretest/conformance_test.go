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
type memBackend struct{ b *coretest.Broker }

type keepOpen struct{}

func (keepOpen) Close() error { return nil }

func (m memBackend) Register(app *core.App)              { app.Register(keepOpen{}) }
func (m memBackend) Endpoint(queue string) core.Endpoint { return m.b.Queue(queue) }
func (m memBackend) Publish(_ context.Context, queue string, body []byte, headers map[string]string) error {
	m.b.Publish(queue, body, headers)
	return nil
}

func (m memBackend) Drain(ctx context.Context, queue string, atLeast int) ([]transporttest.Message, error) {
	var out []transporttest.Message
	for _, s := range m.b.Drain(queue) {
		out = append(out, transporttest.Message{Body: s.Body, Headers: s.Headers, Count: s.Attempt})
	}
	return out, nil
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Env {
		v := clock.NewVirtual(coretest.Epoch)
		b := coretest.NewBroker(v, nil)
		t.Cleanup(func() { b.Close() })
		return transporttest.Env{Backend: memBackend{b}, Clock: v, Virtual: v, LeakCheck: leakCheck}
	})
}
