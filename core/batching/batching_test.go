package batching_test

import (
	"testing"
	"time"

	"github.com/settlehq/settle/core/batching"
)

func TestNext(t *testing.T) {
	for _, c := range []struct {
		cur  int
		full bool
		took time.Duration
		want int
		why  string
	}{
		{10, true, 0, 80, "no time at all: the most growth"},
		{10, true, 10 * time.Millisecond, 80, "10 times would fit, MaxGrowth at most"},
		{10, true, 40 * time.Millisecond, 20, "at least double"},
		{100, true, 20 * time.Millisecond, 300, "capped at the ceiling"},
		{100, false, 20 * time.Millisecond, 100, "not full: kept"},
		{100, true, 150 * time.Millisecond, 100, "over Cycle, under four times: kept"},
		{100, true, 500 * time.Millisecond, 50, "over four times Cycle: halved"},
		{12, false, time.Second, 10, "never below the floor"},
	} {
		if got := batching.Next(c.cur, 10, 300, c.full, c.took); got != c.want {
			t.Errorf("Next(%d, 10, 300, %v, %v) = %d; want %d (%s)", c.cur, c.full, c.took, got, c.want, c.why)
		}
	}
}
