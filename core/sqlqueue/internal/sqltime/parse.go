package sqltime

import "time"

// ParseUTC reads, without time.Parse's generality, the layout of a dialect that keeps times as
// text (SQLite's 2006-01-02T15:04:05.000000Z: UTC, a fraction of 1 to 9 digits or none): claims
// read one per row. ok is false for any other text, which Parse reads with time.Parse; for text
// it accepts, the result is time.Parse(time.RFC3339Nano, s).UTC()'s.
func ParseUTC(s string) (time.Time, bool) {
	if len(s) < 20 || len(s) > 30 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	year, month, day, ok := date(s)
	if !ok {
		return time.Time{}, false
	}
	secs, ok := clockSeconds(s)
	if !ok {
		return time.Time{}, false
	}
	nsec, ok := fraction(s[19 : len(s)-1])
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(daysFromCivil(year, month, day))*86400+int64(secs), int64(nsec)).UTC(), true
}

// date reads the year, month and day of s (laid out as ParseUTC reads), ok when it is a date.
func date(s string) (year, month, day int, ok bool) {
	year, ok = digits(s[0:4])
	month, ok1 := digits(s[5:7])
	day, ok2 := digits(s[8:10])
	if !ok || !ok1 || !ok2 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
		return 0, 0, 0, false
	}
	return year, month, day, true
}

// clockSeconds reads the time of day of s (laid out as ParseUTC reads) in seconds.
func clockSeconds(s string) (int, bool) {
	hour, ok := digits(s[11:13])
	minute, ok1 := digits(s[14:16])
	sec, ok2 := digits(s[17:19])
	if !ok || !ok1 || !ok2 || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	return hour*3600 + minute*60 + sec, true
}

// fraction reads a fraction of a second (".123", or "" for none) in nanoseconds.
func fraction(frac string) (int, bool) {
	if frac == "" {
		return 0, true
	}
	n, ok := digits(frac[1:])
	if frac[0] != '.' || len(frac) < 2 || !ok {
		return 0, false
	}
	for range 10 - len(frac) {
		n *= 10
	}
	return n, true
}

// daysFromCivil is the number of days since 1970-01-01 of a proleptic Gregorian date (H.
// Hinnant's days_from_civil).
func daysFromCivil(year, month, day int) int {
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
	return era*146097 + yoe*365 + yoe/4 - yoe/100 + doy - 719468
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
