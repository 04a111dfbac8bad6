package periodic

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// memClaims keeps claims in memory: the stand-in, in core's tests, for the database that
// SQLClaims asks (the examples module runs the same trial on SQLite and PostgreSQL).
type memClaims struct {
	mu  sync.Mutex
	won map[string]bool
}

func (m *memClaims) ClaimTick(_ context.Context, schedule string, tick time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.won == nil {
		m.won = make(map[string]bool)
	}
	k := TickID(schedule, tick)
	if m.won[k] {
		return false, nil
	}
	m.won[k] = true
	return true, nil
}

type beat struct {
	Tick time.Time `json:"tick"`
}

// process is one scheduler, as one running process of a service has it.
type process struct {
	s *Scheduler
}

func startProcess(t *testing.T, v *clock.Virtual, claims Claimer, target core.Target, sched Schedule, opts ...JobOption) *process {
	t.Helper()
	s, err := New(claims, WithClock(v), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := core.NewPublisher[beat](target)
	if err != nil {
		t.Fatal(err)
	}
	if err := Add(s, "heartbeat", sched, pub, func(_ context.Context, tk Tick) (beat, error) { return beat{Tick: tk.At}, nil }, opts...); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &process{s: s}
}

// TestThreeProcessesPublishOncePerTick: three schedulers of one job share the claims; over 60
// virtual seconds of an every-second schedule, with schedulers stopping and starting (never
// all at once), each tick is published exactly once, none is skipped.
func TestThreeProcessesPublishOncePerTick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	start := utc("2026-12-04T18:00:00Z")
	v := clock.NewVirtual(start)
	b := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer b.Close()
	claims := &memClaims{}
	every, _ := Every(time.Second)
	var procs [3]*process
	for i := range procs {
		procs[i] = startProcess(t, v, claims, b.Queue("beats"), every)
	}
	// second → which process stops (-) or starts (+) before that second's tick
	plan := map[int][]int{10: {-1}, 15: {+1}, 20: {-2, -3}, 24: {+2}, 30: {-1}, 31: {+3}, 45: {-2}, 46: {+1, +2}, 55: {-3}}
	for sec := 1; sec <= 60; sec++ {
		for _, p := range plan[sec] {
			i := abs(p) - 1
			if p < 0 {
				_ = procs[i].s.Close()
				procs[i] = nil
			} else {
				procs[i] = startProcess(t, v, claims, b.Queue("beats"), every)
			}
		}
		alive := 0
		for _, p := range procs {
			if p != nil {
				alive++
			}
		}
		if err := v.BlockUntil(ctx, alive); err != nil {
			t.Fatalf("second %d: %d schedulers never waited on the clock: %v", sec, alive, err)
		}
		v.Advance(time.Second)
	}
	if err := v.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	got := b.Messages("beats")
	if len(got) != 60 {
		t.Fatalf("%d messages in 60 ticks, want 60", len(got))
	}
	for i, m := range got {
		want := TickID("heartbeat", start.Add(time.Duration(i+1)*time.Second))
		if m.ID != want {
			t.Fatalf("message %d has id %s, want %s", i+1, m.ID, want)
		}
	}
	var published int64
	for _, p := range procs {
		if p == nil {
			continue
		}
		st := p.s.Schedules()
		if len(st) != 1 || !st[0].Last.Equal(start.Add(60*time.Second)) || !st[0].Next.Equal(start.Add(61*time.Second)) || st[0].Schedule != "every 1s" {
			t.Errorf("status %+v, want last tick at 60 s and next at 61 s", st)
		}
		published += st[0].Published
	}
	if published == 0 {
		t.Error("the schedulers still running published nothing")
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestCatchUpLast: a scheduler started after an outage publishes the latest missed tick within
// its window, once across processes; without the option, or past the window, it waits for the
// next tick.
func TestCatchUpLast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	v := clock.NewVirtual(utc("2026-12-04T18:00:30Z"))
	b := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer b.Close()
	claims := &memClaims{}
	minute, _ := Every(time.Minute)
	startProcess(t, v, claims, b.Queue("late"), minute, CatchUpLast(10*time.Second))
	startProcess(t, v, claims, b.Queue("plain"), minute)
	if err := v.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Messages("late")) + len(b.Messages("plain")); n != 0 {
		t.Fatalf("%d messages for a tick 30 s old, outside the catch-up window", n)
	}
	startProcess(t, v, claims, b.Queue("late"), minute, CatchUpLast(time.Minute))
	startProcess(t, v, claims, b.Queue("late"), minute, CatchUpLast(time.Minute))
	if err := v.BlockUntil(ctx, 4); err != nil {
		t.Fatal(err)
	}
	got := b.Messages("late")
	if len(got) != 1 || got[0].ID != "heartbeat@2026-12-04T18:00:00Z" {
		t.Fatalf("messages after two catching-up starts: %+v, want the 18:00:00 tick once", got)
	}
	if !strings.Contains(string(got[0].Body), "2026-12-04T18:00:00Z") {
		t.Errorf("body %s does not carry the tick", got[0].Body)
	}
}

// TestTargetDedup: with TargetDedup every process publishes every tick with the tick's dedup
// key, and the target keeps one.
func TestTargetDedup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	start := utc("2026-12-04T18:00:00Z")
	v := clock.NewVirtual(start)
	b := coretest.NewBroker(v, slog.New(slog.DiscardHandler))
	defer b.Close()
	every, _ := Every(time.Second)
	for range 3 {
		startProcess(t, v, TargetDedup, b.Queue("beats"), every)
	}
	for range 5 {
		if err := v.BlockUntil(ctx, 3); err != nil {
			t.Fatal(err)
		}
		v.Advance(time.Second)
	}
	if err := v.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	got := b.Messages("beats")
	if len(got) != 5 {
		t.Fatalf("%d messages for 5 ticks from 3 processes, want 5", len(got))
	}
	for i, m := range got {
		if want := TickID("heartbeat", start.Add(time.Duration(i+1)*time.Second)); m.ID != want || m.DedupKey != want {
			t.Errorf("message %d: id %s, dedup key %s, want %s", i+1, m.ID, m.DedupKey, want)
		}
	}
}

// TestAddRefusesBadJobs: each refusal names the job and the problem.
func TestAddRefusesBadJobs(t *testing.T) {
	s, err := New(TargetDedup)
	if err != nil {
		t.Fatal(err)
	}
	every, _ := Every(time.Second)
	b := coretest.NewBroker(clock.Real(), slog.New(slog.DiscardHandler))
	defer b.Close()
	pub, _ := core.NewPublisher[beat](b.Queue("q"))
	build := func(context.Context, Tick) (beat, error) { return beat{}, nil }
	if err := Add(s, "a", every, pub, build); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{Add(s, "a", every, pub, build), "exists"},
		{Add(s, "", every, pub, build), "job name"},
		{Add(s, "b", nil, pub, build), "schedule"},
		{Add(s, "c", every, pub, build, CatchUpLast(0)), "CatchUpLast"},
		{Add(s, "d", every, pub, build, PublishWith(core.Priority(300))), "Priority"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%v, want an error with %q", c.err, c.want)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}
