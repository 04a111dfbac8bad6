package periodic

import (
	"strings"
	"testing"
	"time"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s: %v (no tzdata)", name, err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestCronTicks: successive ticks from a start, as UTC instants, across zone changes, month
// ends and leap years.
func TestCronTicks(t *testing.T) {
	cases := []struct {
		name, zone, expr, from string
		want                   []string
	}{
		{"daily at a time the spring-forward skips ticks at the end of the gap", "Europe/Berlin", "0 30 2 * * *",
			"2026-03-28T02:00:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"daily at a time the fall-back repeats ticks at its first showing", "Europe/Berlin", "0 30 2 * * *",
			"2026-10-24T12:00:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"quarter-hourly across the spring-forward: one tick at the gap's end", "Europe/Berlin", "0 */15 * * * *",
			"2026-03-29T00:30:00Z", []string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"}},
		{"half-hourly across the fall-back ticks in the repeated hour too", "America/New_York", "0 */30 * * * *",
			"2026-11-01T05:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"}},
		{"hourly at :30 from 1 to 2 in the fall-back ticks once for each wall-clock hour", "America/New_York", "0 30 1-2 * * *",
			"2026-11-01T04:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T06:30:00Z"}},
		{"New York's spring-forward", "America/New_York", "0 30 2 * * *",
			"2026-03-07T12:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"the 31st skips short months", "UTC", "0 0 0 31 * *",
			"2026-01-31T00:00:00Z", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"February 29th only in leap years", "UTC", "0 0 12 29 2 *",
			"2025-01-01T00:00:00Z", []string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		{"2100 is no leap year", "UTC", "0 0 12 29 FEB ?",
			"2097-03-01T00:00:00Z", []string{"2104-02-29T12:00:00Z"}},
		{"the last days of February in a leap year", "Europe/Berlin", "0 0 0 28-31 2 *",
			"2028-02-27T00:00:00Z", []string{"2028-02-27T23:00:00Z", "2028-02-28T23:00:00Z", "2029-02-27T23:00:00Z"}},
		{"day of month or day of week when both are restricted", "UTC", "0 0 0 13 * FRI",
			"2026-02-10T00:00:00Z", []string{"2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z"}},
		{"five fields tick at second 0; 7 is Sunday", "UTC", "15 10 * * 7",
			"2026-12-04T00:00:00Z", []string{"2026-12-06T10:15:00Z", "2026-12-13T10:15:00Z"}},
		{"@monthly in Berlin", "Europe/Berlin", "@monthly",
			"2026-03-15T00:00:00Z", []string{"2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"}},
		{"a list and a stepped range of seconds", "UTC", "5,10-20/5 * * * * *",
			"2026-01-01T00:00:00Z", []string{"2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z", "2026-01-01T00:00:15Z", "2026-01-01T00:00:20Z", "2026-01-01T00:01:05Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Cron(c.expr, zone(t, c.zone))
			if err != nil {
				t.Fatal(err)
			}
			at := utc(c.from)
			for i, w := range c.want {
				at = s.Next(at)
				if !at.Equal(utc(w)) {
					t.Fatalf("tick %d of %s from %s: %s (%s), want %s", i+1, s, c.from, at.UTC().Format(time.RFC3339), at, w)
				}
			}
		})
	}
}

// TestEverySecondAcrossZoneChanges: a schedule of every second ticks every elapsed second
// through both of a year's zone changes, the repeated hour included: no gap, no repeat.
func TestEverySecondAcrossZoneChanges(t *testing.T) {
	for _, z := range []string{"Europe/Berlin", "America/New_York"} {
		loc := zone(t, z)
		s, err := Cron("* * * * * *", loc)
		if err != nil {
			t.Fatal(err)
		}
		for _, day := range []string{"2026-03-29T00:00:00Z", "2026-10-25T00:00:00Z", "2026-03-08T04:00:00Z", "2026-11-01T04:00:00Z"} {
			from := utc(day)
			at := from
			for i := range 4 * 3600 {
				next := s.Next(at)
				if next.Sub(at) != time.Second {
					t.Fatalf("%s from %s: tick %d at %s follows %s", z, day, i, next, at)
				}
				at = next
			}
		}
	}
}

// TestNextIsStrictlyAfter: Next never returns its argument, nor a time before it, from times
// with and without fractions of a second.
func TestNextIsStrictlyAfter(t *testing.T) {
	s, _ := Cron("*/2 * * * * *", time.UTC)
	e, _ := Every(2 * time.Second)
	for _, sch := range []Schedule{s, e} {
		for _, from := range []time.Time{utc("2026-01-01T00:00:02Z"), utc("2026-01-01T00:00:02Z").Add(time.Millisecond), utc("2026-01-01T00:00:01Z").Add(999 * time.Millisecond)} {
			got := sch.Next(from)
			if !got.After(from) || got.Sub(from) > 2*time.Second || got.Unix()%2 != 0 {
				t.Errorf("%s.Next(%s) = %s", sch, from, got)
			}
		}
	}
}

// TestEveryIsAlignedToTheEpoch: processes started at different times agree on the ticks.
func TestEveryIsAlignedToTheEpoch(t *testing.T) {
	s, err := Every(5 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(utc("2026-12-04T17:42:13Z")); !got.Equal(utc("2026-12-04T17:45:00Z")) {
		t.Errorf("Next = %s", got)
	}
	if got := s.Next(utc("1969-12-31T23:57:00Z")); !got.Equal(utc("1970-01-01T00:00:00Z")) {
		t.Errorf("Next before the epoch = %s", got)
	}
	for _, bad := range []time.Duration{0, -time.Second, 500 * time.Millisecond, 1500 * time.Millisecond} {
		if _, err := Every(bad); err == nil {
			t.Errorf("Every(%v) accepted", bad)
		}
	}
}

// TestCronRefusesBadExpressions: each error names the field and what is wrong with it.
func TestCronRefusesBadExpressions(t *testing.T) {
	for expr, want := range map[string]string{
		"* * * *":         "4 fields",
		"61 * * * * *":    "second field",
		"* * 24 * * *":    "hour field",
		"* * * 0 * *":     "day-of-month field",
		"* * * * 13 *":    "month field",
		"* * * * * 8":     "day-of-week field",
		"*/0 * * * * *":   "step",
		"* 5-1 * * * *":   "backwards",
		"* * * * FOO *":   "not a number",
		"0 0 0 30 2 *":    "no date matches",
		"0 0 0 31 4,6 ? ": "no date matches",
	} {
		_, err := Cron(expr, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Cron(%q): %v, want an error with %q", expr, err, want)
		}
	}
}
