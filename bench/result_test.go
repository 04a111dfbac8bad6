package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

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

// reportPairs prints, for each settle contender named in pairs, its ratio to each of its raw
// loops round by round and the median of those ratios (each round runs the contenders one after another, so
// a round's ratio compares drains made moments apart), and reports the median as a metric.
func reportPairs(b *testing.B, rs []result, pairs map[string][]string) {
	byName := map[string]result{}
	for _, r := range rs {
		byName[r.name] = r
	}
	var sb strings.Builder
	for _, r := range rs {
		for _, rawName := range pairs[r.name] {
			reportPair(b, &sb, r, byName[rawName])
		}
	}
	fmt.Print(sb.String())
}

// reportPair writes r's per-round ratios to raw's on sb and reports their median.
func reportPair(b *testing.B, sb *strings.Builder, r, raw result) {
	if raw.name == "" || len(raw.rates) != len(r.rates) || len(r.rates) == 0 {
		return
	}
	var per []string
	rounds := make([]float64, len(r.rates))
	for i := range r.rates {
		rounds[i] = r.rates[i] / raw.rates[i]
		per = append(per, fmt.Sprintf("%.3f", rounds[i]))
	}
	m := result{rates: rounds}.median()
	fmt.Fprintf(sb, "per-round %s ÷ %s: median %.3f [%s]\n", r.name, raw.name, m, strings.Join(per, " "))
	b.ReportMetric(m, metricName(r.name)+"/"+metricName(raw.name))
}
