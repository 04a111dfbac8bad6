package chaos

import (
	"strconv"
	"strings"
)

// unhandledAttempts returns the attempts from 1 to cap that no handler started for the message
// whose ledger lines are idx. A backend that counts only attempts a handler ran (a classic
// RabbitMQ queue: settle's own count header, and the redelivered flag only for a delivery the
// process handed out itself; Expect.HandledToCap) dead-letters a message that always fails
// only after a handler run of each attempt up to the cap: any attempt missing here was counted
// without a run — a broker restart's redelivered flag taken for a delivery.
func unhandledAttempts(entries []Entry, idx []int, cap int) []int {
	started := make(map[int]bool)
	for _, i := range idx {
		if e := entries[i]; e.Ev == EvStart {
			started[e.Attempt] = true
		}
	}
	var missing []int
	for a := 1; a <= cap; a++ {
		if !started[a] {
			missing = append(missing, a)
		}
	}
	return missing
}

// checkHandledToCap adds a Wrong violation for a dead letter of a kind that always fails whose
// attempts up to the cap did not all reach a handler (Expect.HandledToCap).
func checkHandledToCap(r *Result, id string, kind Kind, entries []Entry, idx []int, cap int) {
	missing := unhandledAttempts(entries, idx, cap)
	if len(missing) == 0 {
		return
	}
	s := make([]string, len(missing))
	for i, a := range missing {
		s[i] = strconv.Itoa(a)
	}
	r.Add(Wrong, id, "%s: dead-lettered after %d handler runs of the cap's %d: attempt %s counted without a handler (ledger: %s)",
		kind, cap-len(missing), cap, strings.Join(s, ", "), history(entries, idx))
}
