package amqp

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
)

// FuzzRetryCount: a settle-retry-count header is read strictly. Whatever it holds, the count is
// within [0, core.MaxCount]; a value accepted without error is the count's own decimal form
// (no sign, no leading zero, no other spelling), and a clamped one is core.MaxCount.
func FuzzRetryCount(f *testing.F) {
	for _, s := range []string{"0", "5", "+5", "007", "-50", "abc", "", " 1", "9223372036854775807",
		"18446744073709551617", "1073741824", "1073741825", "99999999999999999999x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := retryCount(amqp091.Table{RetryCountHeader: s})
		if n < 0 || n > core.MaxCount {
			t.Fatalf("%q read as %d, outside [0, %d]", s, n, core.MaxCount)
		}
		switch {
		case err == nil:
			if strconv.Itoa(n) != s {
				t.Fatalf("%q accepted as %d", s, n)
			}
		case errors.Is(err, core.ErrCountClamped):
			if n != core.MaxCount {
				t.Fatalf("%q clamped to %d", s, n)
			}
		default:
			if n != 0 {
				t.Fatalf("%q refused (%v) but read as %d", s, err, n)
			}
		}
		// Same as bytes (a client may send the header as a byte array).
		if m, _ := retryCount(amqp091.Table{RetryCountHeader: []byte(s)}); m != n {
			t.Fatalf("%q as bytes read as %d, as a string %d", s, m, n)
		}
	})
}

// FuzzDeliveryCount: any x-delivery-count, of any integer width, is read within
// [0, core.MaxCount], exactly when it is in range; the attempt built from it and the largest
// settle-retry-count is positive (no overflow).
func FuzzDeliveryCount(f *testing.F) {
	for _, n := range []int64{0, 1, -1, -50, 1 << 30, 1<<30 + 1, 1<<63 - 1, -1 << 63} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		for _, v := range []any{n, int32(n), int16(n), int8(n), uint32(n), uint16(n), uint8(n)} {
			got, err := deliveryCount(amqp091.Table{"x-delivery-count": v})
			want, _ := strconv.ParseInt(strconv.FormatInt(toInt64(v), 10), 10, 64)
			if got < 0 || got > core.MaxCount {
				t.Fatalf("%v (%T) read as %d", v, v, got)
			}
			if want >= 0 && want <= core.MaxCount && (err != nil || int64(got) != want) {
				t.Fatalf("%v (%T) read as %d, %v", v, v, got, err)
			}
			if (want < 0 || want > core.MaxCount) && err == nil {
				t.Fatalf("%v (%T) out of range read as %d without an error", v, v, got)
			}
			if a := attemptOf(core.MaxCount, got); a < 1 {
				t.Fatalf("attempt %d from x-delivery-count %v", a, v)
			}
		}
	})
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case uint32:
		return int64(x)
	case uint16:
		return int64(x)
	case uint8:
		return int64(x)
	}
	panic(v)
}

// FuzzDeaths: an x-death header of any shape (entries that are tables or not, counts of any
// type and value) never fails to read; every entry read has a count within [0, core.MaxCount],
// equal to the entry's own count when that is an integer in range, and an anomaly is reported.
func FuzzDeaths(f *testing.F) {
	f.Add("q", "delivery_limit", int64(1), uint8(0), true)
	f.Add("q.retry", "expired", int64(-3), uint8(1), false)
	f.Add("", "", int64(1<<62), uint8(2), true)
	f.Add("q", "rejected", int64(7), uint8(3), true)
	f.Fuzz(func(t *testing.T, queue, reason string, count int64, kind uint8, asTable bool) {
		var c any
		switch kind % 4 {
		case 0:
			c = count
		case 1:
			c = int32(count)
		case 2:
			c = strconv.FormatInt(count, 10)
		case 3:
			c = nil
		}
		entry := amqp091.Table{"queue": queue, "reason": reason, "count": c, "time": time.Unix(count%1e9, 0),
			"routing-keys": []any{queue, []byte(reason)}}
		var e any = entry
		if !asTable {
			e = queue
		}
		ds, err := Deaths(amqp091.Table{"x-death": []any{e, entry}})
		want := 2
		if !asTable {
			want = 1
			if err == nil {
				t.Fatal("an entry that is not a table was skipped silently")
			}
		}
		if len(ds) != want {
			t.Fatalf("%d entries, want %d", len(ds), want)
		}
		for _, d := range ds {
			if d.Count < 0 || d.Count > core.MaxCount {
				t.Fatalf("count %d outside [0, %d]", d.Count, core.MaxCount)
			}
			if d.Queue != queue || d.Reason != reason || len(d.RoutingKeys) != 2 {
				t.Fatalf("entry %+v", d)
			}
			inRange := kind%4 <= 1 && toInt64(c) >= 0 && toInt64(c) <= core.MaxCount
			if inRange && int64(d.Count) != toInt64(c) {
				t.Fatalf("count %v read as %d", c, d.Count)
			}
			if !inRange && err == nil {
				t.Fatalf("count %v (%T) read as %d without an error", c, c, d.Count)
			}
		}
	})
}
