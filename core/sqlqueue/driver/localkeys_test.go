package driver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type keyConn struct{ Conn }

func TestLocalKeys(t *testing.T) {
	k := LocalKeysFor(filepath.Join(t.TempDir(), "a.db"))
	c1, c2 := &keyConn{}, &keyConn{}
	if !k.TryLock(c1, "t:1") {
		t.Fatal("a free key was refused")
	}
	if !k.TryLock(c1, "t:1") {
		t.Fatal("a key the connection already holds was refused")
	}
	if k.TryLock(c2, "t:1") {
		t.Fatal("a key held by one connection was granted to another")
	}
	k.Unlock(c2, "t:1") // not c2's: left alone
	if k.TryLock(c2, "t:1") {
		t.Fatal("another connection's Unlock released the key")
	}
	k.TryLock(c1, "t:2")
	k.ReleaseConn(c1)
	if k.Held() != 0 || !k.TryLock(c2, "t:1") || !k.TryLock(c2, "t:2") {
		t.Fatalf("a discarded connection's keys were not released (%d held)", k.Held())
	}
	if LocalKeysFor(k.path) != k {
		t.Fatal("two registries for one file")
	}
	other := LocalKeysFor(filepath.Join(t.TempDir(), "b.db"))
	if !other.TryLock(c1, "t:1") {
		t.Fatal("keys of another file collide")
	}
}

// TestLocalKeysHoldRefusesSecondProcess: subscriptions of one process share the companion
// file's lock; a child process asking for it is refused, with the holder's pid, until the last
// share is given back.
func TestLocalKeysHoldRefusesSecondProcess(t *testing.T) {
	if path := os.Getenv("SETTLE_LOCALKEYS_CHILD"); path != "" {
		_, err := LocalKeysFor(path).Hold()
		if err != nil {
			os.Stdout.WriteString(err.Error())
			if errors.Is(err, ErrKeysHeldElsewhere) {
				os.Exit(3)
			}
			os.Exit(4)
		}
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "q.db")
	child := func() (int, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLocalKeysHoldRefusesSecondProcess$")
		cmd.Env = append(os.Environ(), "SETTLE_LOCALKEYS_CHILD="+path)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	k := LocalKeysFor(path)
	r1, err := k.Hold()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := k.Hold()
	if err != nil {
		t.Fatalf("a second subscription of the same process was refused: %v", err)
	}
	code, out := child()
	if code != 3 || !strings.Contains(out, "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(out, "lease form") {
		t.Fatalf("a second process was not refused as it should be: exit %d, %q", code, out)
	}
	r1()
	r1() // idempotent
	if code, out := child(); code != 3 {
		t.Fatalf("released while a share is left: child exit %d, %q", code, out)
	}
	r2()
	if code, out := child(); code != 0 {
		t.Fatalf("the lock was not released with the last share: child exit %d, %q", code, out)
	}
}
