package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/core/clock"
)

// A test moves virtual time instead of sleeping: wait until the code under test is waiting on
// the clock, then Advance it.
func ExampleVirtual() {
	v := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	woke := make(chan time.Time)
	go func() {
		_ = clock.Sleep(context.Background(), v, 30*time.Second)
		woke <- v.Now()
	}()
	_ = v.BlockUntil(context.Background(), 1)
	v.Advance(30 * time.Second)
	fmt.Println((<-woke).Format(time.TimeOnly))
	// Output: 00:00:30
}
