package sqlitecore

import (
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

func TestTimesOrderAsText(t *testing.T) {
	d := NewDialect("sqlite", "sqlite", nil)
	a := time.Date(2026, 1, 1, 0, 0, 0, 900_000_000, time.UTC)
	b := a.Add(time.Microsecond * 200_000) // crosses a second: .9 → 1.1
	sa, sb := d.Time(a).(string), d.Time(b).(string)
	if !(sa < sb) || len(sa) != len(sb) {
		t.Errorf("%s and %s do not order as text", sa, sb)
	}
	back, err := ParseTime(sb)
	if err != nil || !back.Equal(b) {
		t.Errorf("ParseTime(%s) = %v, %v", sb, back, err)
	}
	if d.Time(time.Date(2026, 1, 1, 3, 0, 0, 0, time.FixedZone("x", 3*3600))) != d.Time(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("times are not stored in UTC")
	}
}

func TestColumnKinds(t *testing.T) {
	for decl, want := range map[string]driver.ColumnKind{
		"INTEGER": driver.KindInteger, "BIGINT": driver.KindInteger, "TEXT": driver.KindText, "VARCHAR(20)": driver.KindText,
		"BLOB": driver.KindBytes, "": driver.KindBytes, "JSON": driver.KindJSON, "DATETIME": driver.KindTime, "NUMERIC": driver.KindUnknown,
		"BOOLEAN": driver.KindBool, "REAL": driver.KindFloat, "DOUBLE PRECISION": driver.KindFloat,
	} {
		if got := Kind(decl); got != want {
			t.Errorf("Kind(%q) = %v; want %v", decl, got, want)
		}
	}
}
