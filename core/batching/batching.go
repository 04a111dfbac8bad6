// Package batching is the rule settle's sources size their batches by when no size is given:
// the SQL engine's claims (core/sqlqueue) and transport-nats's fetches. A batch that came back
// full and was got through in under Cycle makes the next one larger, towards what the workers
// get through in Cycle at the rate they just showed (at least double, at most MaxGrowth times),
// up to a ceiling; one that took more than four times Cycle halves it, down to a floor. Fast
// handlers then share one round trip or transaction among many messages after a few batches;
// slow ones keep no more messages taken than they get through in about Cycle.
package batching

import "time"

// Cycle is how long the workers may take to get through a batch before it stops growing.
const Cycle = 100 * time.Millisecond

// MaxGrowth bounds how many times larger one batch makes the next: the rate one batch shows is
// an estimate, and a batch sized on a fluke holds its messages for longer than Cycle.
const MaxGrowth = 8

// Next is the size after a batch of size cur (at least floor, at most ceiling) that came back
// full or not and took took to get through.
func Next(cur, floor, ceiling int, full bool, took time.Duration) int {
	switch {
	case full && took < Cycle:
		grow := MaxGrowth
		if took > 0 {
			grow = min(max(int(Cycle/took), 2), MaxGrowth)
		}
		return min(cur*grow, ceiling)
	case took > 4*Cycle:
		return max(cur/2, floor)
	}
	return cur
}
