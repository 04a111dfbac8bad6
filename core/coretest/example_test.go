package coretest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

type payout struct{ ID string }

// The harness drives a RetryAfter with the virtual clock: publish, wait for the settlement,
// Advance past the delay, wait again.
func TestHarnessExample(t *testing.T) {
	h := coretest.New(t)
	h.LeakCheck = leakCheck // after Stop, no goroutine of the App is left running
	coretest.Subscribe(h, "payouts", func(ctx context.Context, m *core.Message[payout]) error {
		if m.Attempt() < 3 {
			return core.RetryAfter(30 * time.Second)
		}
		return core.Retry()
	}, core.DeadLetterAfter(3, "payouts.dead"))
	h.Start()
	id := h.Publish("payouts", payout{ID: "p-1"})
	h.WaitSettled(1)
	h.Advance(30 * time.Second)
	h.WaitSettled(2)
	h.Advance(30 * time.Second)
	h.WaitSettled(3)
	dead := h.DeadLetters("payouts.dead")
	if len(dead) != 1 || dead[0].Attempt != 3 {
		t.Fatalf("dead letters %+v", dead)
	}
	want := []core.Action{core.ActRetryAfter, core.ActRetryAfter, core.ActDeadLetter}
	if got := h.Actions(id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
}
