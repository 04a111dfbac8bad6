// Package sqltime reads back the times the engine stored, in whatever form the driver hands
// them over: a time.Time, or text in one of the layouts SQLite's and MySQL's clients give.
package sqltime

import (
	"fmt"
	"time"
)

// Parse reads a time column as a dialect stores it: a time.Time, or text in one of the layouts
// SQLite's and MySQL's clients give.
func Parse(v any) (time.Time, error) {
	var s string
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case []byte:
		s = string(x)
	case string:
		s = x
	default:
		return time.Time{}, fmt.Errorf("a %T is not a time", v)
	}
	if t, ok := ParseUTC(s); ok {
		return t, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time", s)
}

// Scanner scans a time column as the dialect returns it (a time.Time, or text) into a
// time.Time; NULL leaves it zero. It is a driver.TimeDest.
type Scanner time.Time

// Scan stores src, which Parse reads.
func (t *Scanner) Scan(src any) error {
	if src == nil {
		*t = Scanner{}
		return nil
	}
	v, err := Parse(src)
	if err != nil {
		return err
	}
	*t = Scanner(v)
	return nil
}

// SetTime stores v in UTC, as Scan does.
func (t *Scanner) SetTime(v time.Time) { *t = Scanner(v.UTC()) }
