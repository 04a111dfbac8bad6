package coretest_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// leakCheck is a coretest.LeakCheck for core's own tests. core has no requirements, so it
// cannot use go.uber.org/goleak as the backend modules do; this reads runtime.Stack the same
// way: every goroutine started after the call must be gone once the App has stopped. A
// goroutine's exit has no event to wait on, so the check looks again (bounded) before failing.
func leakCheck(t testing.TB) func() {
	before := goroutines()
	return func() {
		t.Helper()
		self := header(stack(false)) // the check may run on a goroutine of its own
		var extra []string
		for wait := time.Millisecond; ; wait *= 2 {
			extra = extra[:0]
			for id, stack := range goroutines() {
				if _, ok := before[id]; !ok && id != self {
					extra = append(extra, stack)
				}
			}
			if len(extra) == 0 || wait > time.Second {
				break
			}
			time.Sleep(wait)
		}
		if len(extra) > 0 {
			t.Errorf("%d goroutines left running after the App stopped:\n\n%s", len(extra), strings.Join(extra, "\n\n"))
		}
	}
}

// goroutines returns every goroutine's stack by its id.
func goroutines() map[string]string {
	out := map[string]string{}
	for _, g := range bytes.Split(stack(true), []byte("\n\n")) {
		out[header(g)] = string(g)
	}
	return out
}

// header returns a stack's first words, "goroutine 12".
func header(stack []byte) string {
	h, _, _ := strings.Cut(string(stack), " [")
	return h
}

func stack(all bool) []byte {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestLeakCheckFindsALeak shows that the check fails a test whose App leaves a goroutine.
func TestLeakCheckFindsALeak(t *testing.T) {
	rec := &recordingTB{TB: t}
	check := leakCheck(rec)
	stop := make(chan struct{})
	go func() { <-stop }()
	check()
	close(stop)
	if !strings.Contains(rec.errors, "1 goroutines left running") || !strings.Contains(rec.errors, "TestLeakCheckFindsALeak") {
		t.Fatalf("the check did not report the goroutine left running: %q", rec.errors)
	}
	leakCheck(t)() // and passes when nothing was started
}

type recordingTB struct {
	testing.TB
	errors string
}

func (r *recordingTB) Errorf(format string, args ...any) { r.errors += fmt.Sprintf(format, args...) }
