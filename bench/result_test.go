package bench

import "slices"

// result is one contender's figures over the rounds of a benchmark.
type result struct {
	name  string
	rates []float64 // messages or jobs per second, one per round
}

// best is the contender's best round: the machine is shared, so the best round is the one
// least disturbed by anything else running.
func (r result) best() float64 {
	if len(r.rates) == 0 {
		return 0
	}
	return slices.Max(r.rates)
}

// median is the contender's median round.
func (r result) median() float64 {
	if len(r.rates) == 0 {
		return 0
	}
	s := slices.Clone(r.rates)
	slices.Sort(s)
	return s[len(s)/2]
}
