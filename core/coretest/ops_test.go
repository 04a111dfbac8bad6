package coretest_test

import (
	"testing"
	"time"

	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops/opstest"
)

func TestOps(t *testing.T) {
	opstest.Run(t, opstest.Features{Ready: true, Dead: true}, func(t *testing.T) opstest.Backend {
		b := coretest.NewBroker(clock.NewVirtual(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), nil)
		t.Cleanup(func() { b.Close() })
		read := func(queue string) []coretest.Stored { return b.Messages(queue) }
		return opstest.Backend{
			Queue:  b.Ops("refunds", "refunds.dead"),
			Origin: "refunds",
			AddDead: func(t testing.TB, payload []byte, h map[string]string) string {
				return b.PublishDead("refunds.dead", payload, h)
			},
			AddReady: func(t testing.TB, payload []byte) { b.Publish("refunds", payload, nil) },
			Ready: func(t testing.TB) []opstest.Message {
				var out []opstest.Message
				for _, m := range read("refunds") {
					out = append(out, opstest.Message{Payload: m.Body, Attempts: m.Attempt - 1})
				}
				return out
			},
			Dead: func(t testing.TB) [][]byte {
				var out [][]byte
				for _, m := range read("refunds.dead") {
					out = append(out, m.Body)
				}
				return out
			},
		}
	})
}
