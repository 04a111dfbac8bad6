package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	redisq "github.com/settlehq/settle/transport-redis"
)

// The child of TestCrashLoopEndsInDeadLetter: TestMain runs crashChild instead of the tests when
// this variable names the server.
const crashChildEnv = "SETTLE_REDIS_CRASH_CHILD_URL"

// crashChild serves one stream whose handler kills the process on every delivery. It exits 0
// once its subscription has moved the message to the dead letter (a delivery past the cap, whose
// handler core does not call), 3 from the handler, 4 when nothing happens within 30s.
func crashChild() int {
	url, stream, dead := os.Getenv(crashChildEnv), os.Getenv("SETTLE_REDIS_CRASH_STREAM"), os.Getenv("SETTLE_REDIS_CRASH_DEAD")
	moved := make(chan struct{})
	var once sync.Once
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	app := core.New(core.WithLogger(log), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) {
		if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
			fmt.Printf("attempt %d: moved to the dead letter\n", s.Delivery.Attempt())
			once.Do(func() { close(moved) })
		}
	}))
	c, err := redisq.Open(url, redisq.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	app.Register(c)
	q, err := redisq.NewQueue(c, stream, redisq.Lease(300*time.Millisecond), redisq.Block(100*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	h := func(_ context.Context, m *core.Message[string]) error {
		fmt.Printf("attempt %d: crashing\n", m.Attempt())
		os.Exit(3)
		return nil
	}
	if err := core.Subscribe(app, q, h, raw, core.DeadLetterAfter(3, dead)); err != nil {
		fmt.Println(err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-moved:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := app.Run(ctx); err != nil {
		fmt.Println(err)
		return 1
	}
	select {
	case <-moved:
		return 0
	default:
		return 4
	}
}

// TestCrashLoopEndsInDeadLetter: a handler that kills its process on every delivery never
// settles, and its consumer never gives the entry back: only the pending list counts. Each new
// process claims it again once its lease ran out, the delivery count raised, and the first
// delivery past the cap of 3 goes to the dead letter without the handler. The processes exit 3,
// 3, 3, then 0, and the dead letter says 4 deliveries.
func TestCrashLoopEndsInDeadLetter(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream, dead := prefix+"work", prefix+"work.dead"
	publish(t, url, stream, "poison", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var codes []int
	for range 6 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+url, "SETTLE_REDIS_CRASH_STREAM="+stream, "SETTLE_REDIS_CRASH_DEAD="+dead)
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("child: %v", err)
		}
		t.Logf("child exited %d: %s", code, out)
		codes = append(codes, code)
		if code != 3 {
			break
		}
	}
	if want := []int{3, 3, 3, 0}; !slices.Equal(codes, want) {
		t.Fatalf("children exited %v, want %v", codes, want)
	}
	got, err := drainStream(ctx, admin, dead, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Body) != "poison" || got[0].Count != 4 {
		t.Fatalf("dead letter %+v, want poison with count 4", got)
	}
	info, _, _ := core.ParseDeadLetterInfo(got[0].Headers)
	if want := "not settled after 3 attempts"; !containsAny(info.Error, want) {
		t.Fatalf("dead letter's reason %q, want it to say %q", info.Error, want)
	}
	if n := admin.XLen(ctx, stream).Val(); n != 0 {
		t.Fatalf("stream still holds %d entries", n)
	}
}
