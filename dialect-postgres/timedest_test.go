package postgres_test

import (
	"context"
	"testing"
	"time"
)

// timeDest is a driver.TimeDest that records how it was given its value.
type timeDest struct {
	t       time.Time
	set     bool // SetTime
	scanned any  // Scan's argument
}

func (d *timeDest) SetTime(t time.Time) { d.t, d.set = t.UTC(), true }
func (d *timeDest) Scan(src any) error  { d.scanned = src; return nil }

// A TimeDest reading a timestamp or timestamptz column is given the time pgx decoded (SetTime),
// NULL as the zero time; an infinite timestamp and any other column type go through Scan, as
// they would to a database/sql Scanner.
func TestRowsScanTimeDest(t *testing.T) {
	e := setup(t)
	db := dbTracedBy(t, e, nil)
	rows, err := db.Queue().Query(context.Background(),
		`SELECT '2024-05-06 07:08:09.123456+02'::timestamptz, '2024-05-06 07:08:09.5'::timestamp, NULL::timestamptz, 'infinity'::timestamptz, '2024-05-06'::text, 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no row: %v", rows.Err())
	}
	var tz, ts, null, inf, text timeDest
	null.t = time.Unix(1, 0)
	var n int64
	if err := rows.Scan(&tz, &ts, &null, &inf, &text, &n); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC); !tz.set || !tz.t.Equal(want) || tz.t.Location() != time.UTC {
		t.Errorf("timestamptz: set %v, %v; want SetTime(%v)", tz.set, tz.t, want)
	}
	if want := time.Date(2024, 5, 6, 7, 8, 9, 500000000, time.UTC); !ts.set || !ts.t.Equal(want) {
		t.Errorf("timestamp: set %v, %v; want SetTime(%v)", ts.set, ts.t, want)
	}
	if !null.set || !null.t.IsZero() {
		t.Errorf("NULL: set %v, %v; want SetTime of the zero time", null.set, null.t)
	}
	if inf.set || inf.scanned != "infinity" {
		t.Errorf("infinity: set %v, scanned %#v; want Scan(\"infinity\")", inf.set, inf.scanned)
	}
	if text.set || text.scanned != "2024-05-06" {
		t.Errorf("text: set %v, scanned %#v; want Scan(\"2024-05-06\")", text.set, text.scanned)
	}
	if n != 1 {
		t.Errorf("the column after them: %d; want 1", n)
	}
}
