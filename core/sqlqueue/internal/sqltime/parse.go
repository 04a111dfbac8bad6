package sqltime

import "time"

// ParseUTC reads, without time.Parse's generality, the layout of a dialect that keeps times as
// text (SQLite's 2006-01-02T15:04:05.000000Z: UTC, a fraction of 1 to 9 digits or none): claims
// read one per row. ok is false for any other text, which scanTime reads with time.Parse; for
// text it accepts, the result is time.Parse(time.RFC3339Nano, s).UTC()'s.
func ParseUTC(s string) (time.Time, bool) {
	if len(s) < 20 || len(s) > 30 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	year, ok := digits(s[0:4])
	month, ok1 := digits(s[5:7])
	day, ok2 := digits(s[8:10])
	hour, ok3 := digits(s[11:13])
	minute, ok4 := digits(s[14:16])
	sec, ok5 := digits(s[17:19])
	if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		n, ok := digits(frac[1:])
		if frac[0] != '.' || len(frac) < 2 || !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
	y := year
	if month <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	days := era*146097 + yoe*365 + yoe/4 - yoe/100 + doy - 719468
	return time.Unix(int64(days)*86400+int64(hour*3600+minute*60+sec), int64(nsec)).UTC(), true
}

// digits reads s, decimal digits only (at most 9 of them).
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int(c)
	}
	return n, true
}

// daysIn is the number of days of month m (1–12) in year y.
func daysIn(m, y int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
