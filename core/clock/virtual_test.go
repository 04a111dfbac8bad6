package clock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestVirtualFiresInOrder(t *testing.T) {
	v := clock.NewVirtual(epoch)
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for i, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Second} {
		wg.Add(1)
		tm := v.NewTimer(d)
		go func() {
			defer wg.Done()
			<-tm.C()
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		}()
		// Wait until this goroutine's receive cannot race the next advance.
		_ = i
	}
	if v.Pending() != 4 {
		t.Fatalf("pending = %d, want 4", v.Pending())
	}
	v.Advance(1500 * time.Millisecond)
	if v.Pending() != 2 {
		t.Fatalf("after 1.5s pending = %d, want 2", v.Pending())
	}
	if !v.Now().Equal(epoch.Add(1500 * time.Millisecond)) {
		t.Fatalf("now = %v", v.Now())
	}
	v.Advance(2 * time.Second)
	wg.Wait()
	if len(got) != 4 {
		t.Fatalf("fired %v", got)
	}
}

func TestVirtualAfterFuncSeesDueTime(t *testing.T) {
	v := clock.NewVirtual(epoch)
	seen := make(chan time.Time, 1)
	v.AfterFunc(10*time.Second, func() { seen <- v.Now() })
	v.Advance(time.Minute)
	if at := <-seen; at.Before(epoch.Add(10 * time.Second)) {
		t.Fatalf("fired at %v, before its due time", at)
	}
}

func TestVirtualStopAndReset(t *testing.T) {
	v := clock.NewVirtual(epoch)
	tm := v.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	v.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	tm.Reset(time.Second)
	v.Advance(time.Second)
	select {
	case at := <-tm.C():
		if !at.Equal(epoch.Add(3 * time.Second)) {
			t.Fatalf("fired at %v", at)
		}
	default:
		t.Fatal("reset timer did not fire")
	}
}

func TestBlockUntilAndSleep(t *testing.T) {
	v := clock.NewVirtual(epoch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, v, 30*time.Second) }()
	if err := v.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v.Advance(29 * time.Second)
	select {
	case <-done:
		t.Fatal("Sleep returned before its time")
	default:
	}
	v.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	v := clock.NewVirtual(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, v, time.Hour); err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	if v.Pending() != 0 {
		t.Fatal("timer left armed after a cancelled sleep")
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 8 {
		d = clock.Backoff(d, 100*time.Millisecond, 5*time.Second)
		got = append(got, d)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("backoff = %v; want %v", got, want)
	}
}

func TestWithTimeoutOnTheVirtualClock(t *testing.T) {
	v := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := clock.WithTimeout(context.Background(), v, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a virtual-clock timeout reports a wall-clock deadline")
	}
	v.Advance(time.Second - time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("cancelled before its time: %v", ctx.Err())
	}
	v.Advance(time.Millisecond)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
	}

	parent, stop := context.WithCancel(context.WithValue(context.Background(), keyT{}, "v"))
	child, cancel2 := clock.WithTimeout(parent, v, time.Hour)
	defer cancel2()
	if child.Value(keyT{}) != "v" {
		t.Fatal("the parent's values are lost")
	}
	stop()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("err %v after the parent was cancelled", child.Err())
	}
	if n := v.Pending(); n != 0 {
		t.Fatalf("%d timers armed after both contexts ended; cancel must stop them", n)
	}
}

type keyT struct{}

func TestJitterStaysWithinHalfAndWhole(t *testing.T) {
	for i := 0; i < 1000; i++ {
		if j := clock.Jitter(time.Second); j < 500*time.Millisecond || j > time.Second {
			t.Fatalf("Jitter(1s) = %v", j)
		}
	}
}
