package sqltime

import (
	"math/rand/v2"
	"testing"
	"time"
)

// ParseUTC agrees with time.Parse(time.RFC3339Nano, s).UTC() on every text it accepts, and
// accepts what the SQLite dialect writes.
func TestParseUTCAgreesWithTimeParse(t *testing.T) {
	check := func(s string) {
		t.Helper()
		got, ok := ParseUTC(s)
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("ParseUTC(%q) accepted what time.Parse refuses: %v", s, err)
		}
		if want = want.UTC(); got != want {
			t.Fatalf("ParseUTC(%q) = %v, time.Parse: %v", s, got, want)
		}
	}
	for _, s := range []string{
		"2026-12-01T16:57:00.123456Z", "2026-12-01T16:57:00Z", "2026-12-01T16:57:00.1Z",
		"2026-12-01T16:57:00.123456789Z", "2024-02-29T23:59:59.999999Z", "2023-02-29T00:00:00Z",
		"2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-01T24:00:00Z",
		"2026-12-01T23:60:00Z", "2026-12-01T23:59:60Z", "2026-12-01T16:57:00.Z", "2026-12-01t16:57:00Z",
		"2026-12-01T16:57:00,5Z", "2026-12-01T16:57:00.1234567890Z", "0000-01-01T00:00:00Z",
		"0000-02-29T00:00:00Z", "0000-03-01T00:00:00Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59.5Z",
		"9999-12-31T23:59:59.999999999Z", "2000-02-29T12:00:00Z", "1900-02-29T12:00:00Z",
		"2026-12-01 16:57:00Z", "+026-12-01T16:57:00Z", "2026-1a-01T16:57:00Z", "2026-12-01T16:57:00.12a4Z",
	} {
		check(s)
	}
	for _, s := range []string{"2026-12-01T16:57:00.123456Z", "0000-01-01T00:00:00Z", "1969-12-31T23:59:59.5Z"} {
		if _, ok := ParseUTC(s); !ok {
			t.Fatalf("ParseUTC(%q) refused", s)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		tm := time.Unix(r.Int64N(253402300800+62135596800)-62135596800, r.Int64N(1e9)).UTC()
		for _, layout := range []string{"2006-01-02T15:04:05.000000Z", time.RFC3339Nano, "2006-01-02T15:04:05Z", "2006-01-02T15:04:05.000Z"} {
			s := tm.Format(layout)
			if _, ok := ParseUTC(s); !ok {
				t.Fatalf("ParseUTC(%q) refused", s)
			}
			check(s)
		}
		b := []byte(tm.Format("2006-01-02T15:04:05.000000Z"))
		b[r.IntN(len(b))] = "0123456789-T:.Z x"[r.IntN(17)]
		check(string(b))
	}
}

func FuzzParseUTC(f *testing.F) {
	f.Add("2026-12-01T16:57:00.123456Z")
	f.Add("2024-02-29T23:59:59Z")
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseUTC(s)
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || got != want.UTC() {
			t.Fatalf("ParseUTC(%q) = %v; time.Parse: %v, %v", s, got, want, err)
		}
	})
}

func BenchmarkScanTime(b *testing.B) {
	s := any("2026-12-01T16:57:00.123456Z")
	for b.Loop() {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}
