package core_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

func TestOutcomesSurviveWrapping(t *testing.T) {
	cause := errors.New("processor busy")
	cases := []struct {
		err   error
		kind  core.OutcomeKind
		delay time.Duration
		text  string
	}{
		{core.Drop(), core.OutcomeDrop, 0, "drop"},
		{core.Retry(), core.OutcomeRetry, 0, "retry"},
		{core.RetryAfter(3 * time.Second), core.OutcomeRetryAfter, 3 * time.Second, "retry_after(3s)"},
		{core.RetryAfter(-time.Second), core.OutcomeRetryAfter, 0, "retry_after(0s)"},
		{core.RetryAfter(time.Second).Because(cause), core.OutcomeRetryAfter, time.Second, "retry_after(1s): processor busy"},
		{fmt.Errorf("refund r-1: %w", core.Drop().Because(cause)), core.OutcomeDrop, 0, "refund r-1: drop: processor busy"},
	}
	for _, c := range cases {
		o, ok := core.AsOutcome(c.err)
		if !ok {
			t.Fatalf("%v: no outcome recovered", c.err)
		}
		if o.Kind() != c.kind || o.Delay() != c.delay || c.err.Error() != c.text {
			t.Errorf("%v: kind %v delay %v text %q", c.err, o.Kind(), o.Delay(), c.err.Error())
		}
	}
	if !errors.Is(core.Retry().Because(cause), cause) {
		t.Error("errors.Is does not reach the cause")
	}
	if core.Retry().Unwrap() != nil {
		t.Error("Because changed the shared Retry outcome")
	}
	if _, ok := core.AsOutcome(errors.New("plain")); ok {
		t.Error("a plain error was taken for an outcome")
	}
}

func TestResolve(t *testing.T) {
	retry := core.Verdict{Action: core.ActRetry}
	later := core.Verdict{Action: core.ActRetryAfter, Delay: time.Second}
	dead := core.Verdict{Action: core.ActDeadLetter, Dest: "q.dead"}
	cases := []struct {
		name         string
		in           core.Verdict
		attempt, cap int
		serverCounts bool
		want         core.Verdict
	}{
		{"below cap", retry, 2, 3, false, retry},
		{"at cap", retry, 3, 3, false, dead},
		{"past cap", later, 7, 3, false, dead},
		{"cap of one", later, 1, 1, false, dead},
		{"no cap", retry, 100, 0, false, retry},
		{"server counts", retry, 5, 3, true, retry},
		{"ack at cap", core.Verdict{Action: core.ActAck}, 3, 3, false, core.Verdict{Action: core.ActAck}},
		{"drop at cap", core.Verdict{Action: core.ActDrop}, 3, 3, false, core.Verdict{Action: core.ActDrop}},
	}
	for _, c := range cases {
		if got := core.Resolve(c.in, c.attempt, c.cap, "q.dead", c.serverCounts); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
