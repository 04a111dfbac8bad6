package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// The child of TestCrashLoopEndsInDeadLetter: TestMain runs crashChild instead of the tests when
// this variable names the server.
const crashChildEnv = "SETTLE_NATS_CRASH_CHILD_URL"

// crashChild serves one queue whose handler kills the process on every delivery. It exits 0 once
// its subscription has moved the message to the dead letter (a delivery past the cap, whose
// handler core does not call), 3 from the handler, 4 when nothing happens within 30s.
func crashChild() int {
	url, subject, dead := os.Getenv(crashChildEnv), os.Getenv("SETTLE_NATS_CRASH_SUBJECT"), os.Getenv("SETTLE_NATS_CRASH_DEAD")
	moved := make(chan struct{})
	var once sync.Once
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	app := core.New(core.WithLogger(log), core.WithoutSignals(), core.WithObserver(func(s core.Settlement) {
		if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
			fmt.Printf("attempt %d: moved to the dead letter\n", s.Delivery.Attempt())
			once.Do(func() { close(moved) })
		}
	}))
	conn, err := natsjs.New(url, natsjs.DeclareTopology(true), natsjs.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	app.Register(conn)
	q, err := natsjs.NewQueue(conn, subject, natsjs.AckWait(time.Second))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	h := func(ctx context.Context, m *core.Message[string]) error {
		if m.Payload != "poison" {
			select { // a handler's work: the poison crashes meanwhile
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			fmt.Printf("neighbour %s attempt %d: ack\n", m.Payload, m.Attempt())
			return nil
		}
		fmt.Printf("attempt %d: crashing\n", m.Attempt())
		os.Exit(3)
		return nil
	}
	workers, _ := strconv.Atoi(os.Getenv("SETTLE_NATS_CRASH_WORKERS"))
	if err := core.Subscribe(app, q, h, raw, core.DeadLetterAfter(3, dead), core.Workers(max(workers, 1))); err != nil {
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
// settles, so only the server counts: each restart gets the message again (after AckWait) with
// NumDelivered raised, and the first delivery past the cap of 3 goes to the dead letter without
// the handler. The processes exit 3, 3, 3, then 0, and the dead letter says 4 deliveries.
func TestCrashLoopEndsInDeadLetter(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		a := newAdmin(t, url)
		prefix := uniquePrefix(t)
		a.deleteStreamsOnCleanup(t, prefix)
		subject, dead := prefix+".work", prefix+".work.dead"
		ctx, cancel := contextWithTimeout(60 * time.Second)
		defer cancel()
		if _, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix + "_work", Subjects: []string{subject}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.js.Publish(ctx, subject, []byte("poison")); err != nil {
			t.Fatal(err)
		}
		var codes []int
		for range 6 {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+url, "SETTLE_NATS_CRASH_SUBJECT="+subject, "SETTLE_NATS_CRASH_DEAD="+dead)
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
		if !slices.Equal(codes, []int{3, 3, 3, 0}) {
			t.Fatalf("children exited %v; want three crashes, then the dead letter", codes)
		}
		got, err := a.takeAtLeast(ctx, prefix+"_work_dead", dead, 1)
		if err != nil {
			t.Fatal(err)
		}
		h := got[0].Headers
		if n, _ := strconv.Atoi(h.Get(core.HeaderRetryCount)); len(got) != 1 || string(got[0].Body) != "poison" || n != 4 || h.Get(core.HeaderError) != "not settled after 3 attempts (cap 3)" {
			t.Fatalf("dead letter %q with headers %v; want the poison message after 4 deliveries with a reason", got[0].Body, h)
		}
		if left, err := a.take(ctx, prefix+"_work"); err != nil || len(left) != 0 {
			t.Fatalf("work stream still holds %d messages (%v)", len(left), err)
		}
	})
}

// TestCrashChargesOnlyItsMessage: the poison message is published before three neighbours, and
// the children run four workers (a fetch of four). A child starts fetching one message at a
// time, and for one AckWait after it starts (the consumer had unacknowledged messages, its
// predecessor's) or after a suspect delivery, and it hands out nothing else while a suspect
// delivery is being handled: so the poison crashes alone, each time, and its neighbours are
// acknowledged at their first or second delivery. Before the window, every child fetched the
// poison with its three neighbours, each crash charged them a delivery, and the fourth child
// dead-lettered all four as "not settled".
func TestCrashChargesOnlyItsMessage(t *testing.T) {
	eachServer(t, func(t *testing.T, url string) {
		a := newAdmin(t, url)
		prefix := uniquePrefix(t)
		a.deleteStreamsOnCleanup(t, prefix)
		subject, dead := prefix+".work", prefix+".work.dead"
		ctx, cancel := contextWithTimeout(90 * time.Second)
		defer cancel()
		if _, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix + "_work", Subjects: []string{subject}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{"poison", "n1", "n2", "n3"} {
			if _, err := a.js.Publish(ctx, subject, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		var codes []int
		var out []byte
		for range 8 {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+url, "SETTLE_NATS_CRASH_SUBJECT="+subject, "SETTLE_NATS_CRASH_DEAD="+dead,
				"SETTLE_NATS_CRASH_WORKERS=4")
			o, err := cmd.Output()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("child: %v", err)
			}
			t.Logf("child exited %d: %s", code, o)
			out = append(out, o...)
			codes = append(codes, code)
			if code != 3 {
				break
			}
		}
		if !slices.Equal(codes, []int{3, 3, 3, 0}) {
			t.Fatalf("children exited %v; want three crashes, then the dead letter", codes)
		}
		got, err := a.takeAtLeast(ctx, prefix+"_work_dead", dead, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || string(got[0].Body) != "poison" {
			var bodies []string
			for _, m := range got {
				bodies = append(bodies, string(m.Body))
			}
			t.Fatalf("dead letters %v; want the poison alone", bodies)
		}
		for _, n := range []string{"n1", "n2", "n3"} {
			acked := false
			for a := 1; a <= 2; a++ {
				acked = acked || strings.Contains(string(out), fmt.Sprintf("neighbour %s attempt %d: ack", n, a))
			}
			if !acked {
				t.Errorf("neighbour %s not acknowledged at its first or second delivery", n)
			}
		}
	})
}
