package periodic

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cron is a parsed cron expression in a time zone.
type cron struct {
	expr                       string
	loc                        *time.Location
	sec, min, hour, dom, month uint64 // bit i set: value i matches
	dow                        uint64
	domStar, dowStar           bool
	everyHour                  bool // the hour field matches all 24 hours
}

// Cron parses a cron expression with seconds, read on the wall clock of loc (nil: UTC):
//
//	second minute hour day-of-month month day-of-week
//
// Each field is *, a value, a range a-b, a list a,b,c or a step */n, a-b/n, a/n; months and days
// of the week may be named (JAN-DEC, SUN-SAT; Sunday is 0 or 7); ? stands for * in the day
// fields. A five-field expression (no seconds) ticks at second 0. @yearly, @monthly, @weekly,
// @daily and @hourly are accepted. When both day fields are restricted, a day matching either
// matches (as in Vixie cron).
//
// Wall-clock changes of loc:
//   - a time that the clock skips (spring forward: 02:30 on a day that jumps from 02:00 to
//     03:00) ticks once, at the first instant after the gap (03:00); times in one gap that
//     match tick only once there.
//   - a time that the clock shows twice (fall back) ticks at its first showing only — unless
//     the hour field matches every hour (* * * …, */10 * * …): such a schedule is about elapsed
//     time, and ticks in the repeated hour again.
func Cron(expr string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	fields := strings.Fields(expr)
	if len(fields) == 1 {
		if d, ok := descriptors[fields[0]]; ok {
			fields = strings.Fields(d)
		}
	}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, fmt.Errorf("periodic.Cron(%q): %d fields; want 6 (second minute hour day-of-month month day-of-week) or 5", expr, len(fields))
	}
	c := &cron{expr: strings.Join(strings.Fields(expr), " "), loc: loc}
	specs := []struct {
		dst      *uint64
		name     string
		lo, hi   int
		names    map[string]int
		question bool
	}{
		{&c.sec, "second", 0, 59, nil, false},
		{&c.min, "minute", 0, 59, nil, false},
		{&c.hour, "hour", 0, 23, nil, false},
		{&c.dom, "day-of-month", 1, 31, nil, true},
		{&c.month, "month", 1, 12, monthNames, false},
		{&c.dow, "day-of-week", 0, 7, dayNames, true},
	}
	for i, s := range specs {
		f := fields[i]
		if s.question && f == "?" {
			f = "*"
		}
		bits, err := parseField(f, s.lo, s.hi, s.names)
		if err != nil {
			return nil, fmt.Errorf("periodic.Cron(%q): %s field %q: %w", expr, s.name, fields[i], err)
		}
		*s.dst = bits
	}
	if c.dow&(1<<7) != 0 {
		c.dow |= 1 // 7 is Sunday too
	}
	c.domStar = fields[3] == "*" || fields[3] == "?"
	c.dowStar = fields[5] == "*" || fields[5] == "?"
	c.everyHour = c.hour == 1<<24-1
	if c.search(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2009, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("periodic.Cron(%q): %w", expr, errNever)
	}
	return c, nil
}

var descriptors = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

var monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
	"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}

var dayNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// parseField parses one field into a bit set of the values in [lo, hi] it matches.
func parseField(f string, lo, hi int, names map[string]int) (uint64, error) {
	var bits uint64
	for part := range strings.SplitSeq(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err error
			if a, err = value(x, lo, hi, names); err != nil {
				return 0, err
			}
			if b, err = value(y, lo, hi, names); err != nil {
				return 0, err
			}
			if a > b {
				return 0, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			v, err := value(rng, lo, hi, names)
			if err != nil {
				return 0, err
			}
			a, b = v, v
			if hasStep {
				b = hi
			}
		}
		for v := a; v <= b; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

func value(s string, lo, hi int, names map[string]int) (int, error) {
	if v, ok := names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is outside %d-%d", v, lo, hi)
	}
	return v, nil
}

func (c *cron) String() string { return "cron " + c.expr + " " + c.loc.String() }

func (c *cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<t.Day()) != 0
	dow := c.dow&(1<<int(t.Weekday())) != 0
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// search returns the first wall-clock time w in [from, limit) that the expression matches, or
// the zero time. Wall-clock times are kept in UTC, where no day is longer or shorter than
// another, so the search steps through fields without meeting a zone change.
func (c *cron) search(from, limit time.Time) time.Time {
	t := from
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	for t.Before(limit) {
		switch {
		case c.month&(1<<int(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case c.hour&(1<<t.Hour()) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case c.min&(1<<t.Minute()) == 0:
			t = t.Truncate(time.Minute).Add(time.Minute)
		case c.sec&(1<<t.Second()) == 0:
			t = t.Add(time.Second)
		default:
			return t
		}
	}
	return time.Time{}
}

// wall is t's reading on the clock of loc, as a UTC time.
func wall(t time.Time, loc *time.Location) time.Time {
	y, mo, d := t.In(loc).Date()
	h, mi, s := t.In(loc).Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// horizon bounds the search for a next tick: an expression that matches a date at all matches
// one within eight years (February 29th).
const horizon = 8 * 366 * 24 * time.Hour

// Next walks the zone periods of loc from t on (a period has one UTC offset; its instants map
// one to one onto a range of wall-clock times) and returns the first instant whose wall-clock
// time matches, with the rules for skipped and repeated times of Cron.
func (c *cron) Next(t time.Time) time.Time {
	end := t.Add(horizon)
	at := t.Truncate(time.Second).Add(time.Second) // the first candidate instant
	for at.Before(end) {
		_, off := at.In(c.loc).Zone()
		pstart, pend := at.In(c.loc).ZoneBounds()
		offset := time.Duration(off) * time.Second
		from := wall(at, c.loc)
		if !c.everyHour && !pstart.IsZero() {
			// The period began with a fall back: the wall-clock times it shows first were
			// shown before it, and tick there only.
			_, prev := pstart.Add(-time.Second).In(c.loc).Zone()
			if back := time.Duration(prev-off) * time.Second; back > 0 {
				if shown := wall(pstart, c.loc).Add(back); from.Before(shown) {
					from = shown
				}
			}
		}
		limit := end.Add(offset)
		if !pend.IsZero() && pend.Before(end) {
			limit = pend.UTC().Add(offset) // the wall-clock end of this period
		}
		if w := c.search(from, limit); !w.IsZero() {
			return w.Add(-offset).In(c.loc)
		}
		if pend.IsZero() || !pend.Before(end) {
			return time.Time{}
		}
		// A spring forward: wall-clock times in the gap tick once, at its end.
		_, next := pend.In(c.loc).Zone()
		if gap := time.Duration(next-off) * time.Second; gap > 0 {
			if !c.search(limit, limit.Add(gap)).IsZero() {
				return pend.In(c.loc)
			}
		}
		at = pend
	}
	return time.Time{}
}
