package chaos_test

import (
	"slices"
	"testing"

	"github.com/settlehq/settle/chaos"
)

// Issue 42, item 10: on a classic RabbitMQ queue a message that always fails must reach its
// dead letter only after a handler ran each of the cap's attempts; a broker restart flags every
// recovered message redelivered, and counting that flag skipped a run.
func TestCheckHandledToCap(t *testing.T) {
	id := "m-000001"
	dead := chaos.Snapshot{Messages: map[string]chaos.Observed{id: {Where: chaos.Dead, Copies: 1, Count: 3}}, AbsentIsSettled: true}
	for _, c := range []struct {
		name  string
		build func(l *ledger)
		want  []chaos.Category
	}{
		{name: "three runs", build: func(l *ledger) {
			l.run("w1", id, 1, "retry", true)
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "dead_letter", true)
		}},
		// the broker killed with attempt 1 prefetched: it came back flagged redelivered and was
		// counted as attempt 2 without a run
		{name: "a restart's flag counted", build: func(l *ledger) {
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "restart-crash", Phase: "begin", Blocks: true})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "restart-crash", Phase: "end", Blocks: true})
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "dead_letter", true)
		}, want: []chaos.Category{chaos.Wrong}},
		// run at attempt 1, its settlement lost with the broker, counted again as attempt 2
		// in the same process: every attempt ran
		{name: "a run whose settlement died", build: func(l *ledger) {
			l.run("w1", id, 1, "retry", false)
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "dead_letter", true)
		}},
		// attempt 2 run twice (a successor process does not count the flag): still every attempt
		{name: "an attempt run twice", build: func(l *ledger) {
			l.run("w1", id, 1, "retry", true)
			l.add(chaos.Entry{Ev: chaos.EvStart, Who: "w1", ID: id, Attempt: 2})
			l.add(chaos.Entry{Ev: chaos.EvFault, Who: "driver", Fault: "kill", Detail: "w1"})
			l.run("w1", id, 2, "retry", true)
			l.run("w1", id, 3, "dead_letter", true)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l ledger
			l.add(chaos.Entry{Ev: chaos.EvSeeded})
			c.build(&l)
			l.add(chaos.Entry{Ev: chaos.EvDrained})
			exp := chaos.Expect{IDs: []string{id}, Mix: oneKind(t, chaos.Fail), Cap: 3, HandledToCap: true}
			res := chaos.Check(l.entries, dead, exp)
			if got := res.Failed(); !slices.Equal(got, c.want) {
				t.Fatalf("failed categories %v, want %v; violations %v", got, c.want, res.Violations)
			}
			exp.HandledToCap = false
			if got := chaos.Check(l.entries, dead, exp).Failed(); len(got) != 0 {
				t.Fatalf("without HandledToCap: failed categories %v, want none", got)
			}
		})
	}
}
