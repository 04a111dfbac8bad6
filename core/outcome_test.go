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
	cause := errors.New("card declined")
	cases := []struct {
		name         string
		in           core.Verdict
		attempt, cap int
		dead         bool
		reason       string
	}{
		{"below cap", retry, 2, 3, false, ""},
		{"at cap", retry, 3, 3, true, "retry at attempt 3 of 3"},
		{"past cap", later, 7, 3, true, "retry_after(1s) at attempt 7 of 3"},
		{"cap of one", later, 1, 1, true, "retry_after(1s) at attempt 1 of 1"},
		{"with a cause", core.Verdict{Action: core.ActRetry, Cause: cause}, 3, 3, true, "retry at attempt 3 of 3: card declined"},
		{"no cap", retry, 100, 0, false, ""},
		{"ack at cap", core.Verdict{Action: core.ActAck}, 3, 3, false, ""},
		{"drop at cap", core.Verdict{Action: core.ActDrop}, 3, 3, false, ""},
	}
	for _, c := range cases {
		got := core.Resolve(c.in, c.attempt, c.cap, "q.dead")
		if !c.dead {
			if got.Action != c.in.Action || got.Delay != c.in.Delay || got.Dest != c.in.Dest || got.Cause != c.in.Cause {
				t.Errorf("%s: got %v, want it unchanged", c.name, got)
			}
			continue
		}
		if got.Action != core.ActDeadLetter || got.Dest != "q.dead" {
			t.Errorf("%s: got %v, want dead_letter(q.dead)", c.name, got)
			continue
		}
		if r := core.Reason(got); r != c.reason {
			t.Errorf("%s: reason %q, want %q", c.name, r, c.reason)
		}
		var de *core.DeadLetterError
		if !errors.As(got.Cause, &de) || de.Attempt != c.attempt || de.Cap != c.cap || de.NotSettled {
			t.Errorf("%s: cause %#v", c.name, got.Cause)
		}
		if c.in.Cause != nil && !errors.Is(got.Cause, c.in.Cause) {
			t.Errorf("%s: the handler's cause is not in the chain", c.name)
		}
	}
}
