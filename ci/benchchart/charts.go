package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stats is the summary of one point's rounds.
type stats struct {
	Median, Min, Max float64
	Rounds           int
}

// summarize gives the median of vs (the mean of the two middle values for an even count) and
// their range. vs must not be empty.
func summarize(vs []float64) stats {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return stats{Median: m, Min: s[0], Max: s[n-1], Rounds: n}
}

// point is one measured point of a series.
type point struct {
	X float64
	stats
	line int
}

type series struct {
	Name   string
	Points []point // by X
}

// isRaw reports whether a series is a raw loop, the reference for ratios.
func (s *series) isRaw() bool { return strings.HasPrefix(strings.ToLower(s.Name), "raw") }

func (s *series) at(x float64) (point, bool) {
	for _, p := range s.Points {
		if p.X == x {
			return p, true
		}
	}
	return point{}, false
}

// chart is one (chart, backend) group: one SVG and one table.
type chart struct {
	Chart, Backend string
	XName, Unit    string
	Series         []*series // in the order of their first record
	Dates          []time.Time
	Machines       []string
	LoadMin        float64 // of the points with a known load; NaN when none is known
	LoadMax        float64
	RoundsMin      int
	RoundsMax      int
}

func (c *chart) Title() string { return c.Chart + " — " + c.Backend }

// File is the chart's SVG file name: "<chart>-<backend>.svg", lowercase, letters, digits and
// dashes only, so it is the same from run to run and safe in a URL.
func (c *chart) File() string { return slug(c.Chart) + "-" + slug(c.Backend) + ".svg" }

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// Caption is the line under the chart: the run's date, the machine, the load average over the
// chart's points and the rounds behind each median.
func (c *chart) Caption() string {
	var parts []string
	first, last := c.Dates[0], c.Dates[len(c.Dates)-1]
	date := "run " + first.Format("2006-01-02 15:04") + " UTC"
	switch {
	case len(c.Dates) == 1:
	case first.Format("2006-01-02") == last.Format("2006-01-02"):
		date = "runs " + first.Format("2006-01-02 15:04") + "–" + last.Format("15:04") + " UTC"
	default:
		date = "runs " + first.Format("2006-01-02 15:04") + " – " + last.Format("2006-01-02 15:04") + " UTC"
	}
	parts = append(parts, date, strings.Join(c.Machines, " / "))
	switch {
	case math.IsNaN(c.LoadMin):
		parts = append(parts, "load average unknown")
	case c.LoadMin == c.LoadMax:
		parts = append(parts, "load average "+fmtLoad(c.LoadMin))
	default:
		parts = append(parts, "load average "+fmtLoad(c.LoadMin)+"–"+fmtLoad(c.LoadMax))
	}
	rounds := fmt.Sprint(c.RoundsMin)
	if c.RoundsMax != c.RoundsMin {
		rounds += "–" + fmt.Sprint(c.RoundsMax)
	}
	parts = append(parts, "medians of "+rounds+" rounds, error bars min–max")
	return strings.Join(parts, " · ")
}

func fmtLoad(v float64) string { return fmt.Sprintf("%.1f", v) }

// chartOrder puts the charts bench/README.md discusses first, in its order.
var chartOrder = []string{"throughput", "scaling", "backlog", "latency", "memory"}

// group sorts the records into charts, one per (chart, backend), checking that each chart
// measures one thing: one unit, one x_name, one record per series and x.
func group(lines []line, file string) ([]*chart, error) {
	type key struct{ chart, backend string }
	type ptKey struct {
		series string
		x      float64
	}
	byKey := map[key]*chart{}
	first := map[key]int{}           // first line of each chart, for errors
	seen := map[key]map[ptKey]int{}  // line of each point
	backendOrder := map[string]int{} // first appearance
	var charts []*chart
	files := map[string]key{}
	for _, l := range lines {
		k := key{l.Chart, l.Backend}
		c := byKey[k]
		if c == nil {
			c = &chart{Chart: l.Chart, Backend: l.Backend, XName: l.XName, Unit: l.Unit,
				LoadMin: math.NaN(), LoadMax: math.NaN()}
			if other, ok := files[c.File()]; ok {
				return nil, &inputError{file, l.n, fmt.Sprintf("chart %q, backend %q would be drawn to %s, as chart %q, backend %q (line %d) is",
					l.Chart, l.Backend, c.File(), other.chart, other.backend, first[other])}
			}
			files[c.File()] = k
			byKey[k], first[k], seen[k] = c, l.n, map[ptKey]int{}
			if _, ok := backendOrder[l.Backend]; !ok {
				backendOrder[l.Backend] = len(backendOrder)
			}
			charts = append(charts, c)
		}
		where := fmt.Sprintf("chart %q, backend %q (first recorded on line %d)", l.Chart, l.Backend, first[k])
		if l.Unit != c.Unit {
			return nil, &inputError{file, l.n, fmt.Sprintf("field \"unit\": %q, but %s is in %q: one chart has one unit", l.Unit, where, c.Unit)}
		}
		if l.XName != c.XName {
			return nil, &inputError{file, l.n, fmt.Sprintf("field \"x_name\": %q, but %s has x_name %q: one chart has one x axis", l.XName, where, c.XName)}
		}
		pk := ptKey{l.Series, l.X}
		if c.XName == "" {
			pk.x = 0 // a bar per series: x means nothing
		}
		if prev, dup := seen[k][pk]; dup {
			at := ""
			if c.XName != "" {
				at = fmt.Sprintf(" at %s = %s", c.XName, fmtX(l.X))
			}
			return nil, &inputError{file, l.n, fmt.Sprintf("field \"series\": %q%s already recorded on line %d (two runs in one file? ci/bench.sh starts a fresh one)", l.Series, at, prev)}
		}
		seen[k][pk] = l.n

		var s *series
		for _, t := range c.Series {
			if t.Name == l.Series {
				s = t
			}
		}
		if s == nil {
			s = &series{Name: l.Series}
			c.Series = append(c.Series, s)
		}
		st := summarize(l.Values)
		s.Points = append(s.Points, point{X: pk.x, stats: st, line: l.n})
		if !slices.ContainsFunc(c.Dates, l.date.Equal) {
			c.Dates = append(c.Dates, l.date)
		}
		if !slices.Contains(c.Machines, l.Machine) {
			c.Machines = append(c.Machines, l.Machine)
		}
		if l.Load >= 0 {
			if math.IsNaN(c.LoadMin) {
				c.LoadMin, c.LoadMax = l.Load, l.Load
			}
			c.LoadMin, c.LoadMax = math.Min(c.LoadMin, l.Load), math.Max(c.LoadMax, l.Load)
		}
		if c.RoundsMin == 0 || st.Rounds < c.RoundsMin {
			c.RoundsMin = st.Rounds
		}
		c.RoundsMax = max(c.RoundsMax, st.Rounds)
	}
	for _, c := range charts {
		slices.SortFunc(c.Dates, func(a, b time.Time) int { return a.Compare(b) })
		for _, s := range c.Series {
			slices.SortStableFunc(s.Points, func(a, b point) int { return cmp.Compare(a.X, b.X) })
		}
	}
	rank := func(name string) int {
		if i := slices.Index(chartOrder, name); i >= 0 {
			return i
		}
		return len(chartOrder)
	}
	slices.SortStableFunc(charts, func(a, b *chart) int {
		return cmp.Or(cmp.Compare(rank(a.Chart), rank(b.Chart)), cmp.Compare(a.Chart, b.Chart),
			cmp.Compare(backendOrder[a.Backend], backendOrder[b.Backend]))
	})
	return charts, nil
}

// row is one line of a chart's table.
type row struct {
	Series string
	X      float64
	stats
	Ratio float64 // median ÷ the reference's median at the same x; NaN when there is none
	Ref   string  // the reference series; "" for a raw series itself or when there is none
}

// rows gives a chart's table: each series' points, with the ratio of each median to the raw
// loop's (a series whose name starts with "raw") at the same x. With several raw loops in one
// chart (one per form, say), a series is compared to the closest raw loop recorded before it, or
// the first raw loop for a series recorded before any.
func (c *chart) rows() []row {
	var out []row
	for i, s := range c.Series {
		var ref *series
		if !s.isRaw() {
			for _, t := range c.Series[:i] {
				if t.isRaw() {
					ref = t
				}
			}
			if ref == nil {
				for _, t := range c.Series[i:] {
					if t.isRaw() {
						ref = t
						break
					}
				}
			}
		}
		for _, p := range s.Points {
			r := row{Series: s.Name, X: p.X, stats: p.stats, Ratio: math.NaN()}
			if ref != nil {
				r.Ref = ref.Name
				if q, ok := ref.at(p.X); ok && q.Median != 0 {
					r.Ratio = p.Median / q.Median
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// rawCount is the number of raw loops in the chart.
func (c *chart) rawCount() int {
	n := 0
	for _, s := range c.Series {
		if s.isRaw() {
			n++
		}
	}
	return n
}

// fmtNum formats a measured figure with three significant digits (all of them for figures of
// 100 and more).
func fmtNum(v float64) string { return fmtPrec(v, prec(v)) }

// prec is the number of decimals that gives v three significant digits.
func prec(v float64) int {
	a := math.Abs(v)
	if a == 0 || a >= 100 {
		return 0
	}
	return max(0, 2-int(math.Floor(math.Log10(a))))
}

func fmtPrec(v float64, decimals int) string { return strconv.FormatFloat(v, 'f', decimals, 64) }

// fmtX formats an x value: workers and rows are integers, percentiles may not be.
func fmtX(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
