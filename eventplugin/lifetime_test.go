//go:build linux

package eventplugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core/coretest"
	"golang.org/x/sys/unix"
)

// TestPluginDiesWithItsHost SIGKILLs a host process (the test binary as a service that loaded
// its plugin) and finds the plugin process gone: by the death signal Load sets, and, with that
// off, by Serve's own watch of its parent. Both host and plugin inherit the write end of a
// pipe, so the test's read end reaches EOF exactly when neither process is left.
func TestPluginDiesWithItsHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, mode string }{
		{"death signal", "host"},
		{"Serve watches its parent", "host-no-deathsig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.mode == "host" && runtime.GOOS != "linux" {
				t.Skip("the parent-death signal is Linux's")
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			host := exec.Command(os.Args[0])
			host.Env = append(os.Environ(), helperEnv+"="+c.mode)
			host.ExtraFiles = []*os.File{w}
			host.Stderr = os.Stderr
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			ready := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(out).ReadString('\n')
				ready <- line
			}()
			var pid int
			t.Cleanup(func() {
				// A plugin that outlived its host (the test failed) is not left running.
				if pid > 0 && procState(pid) != "gone" && procState(pid) != "Z" {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			select {
			case line := <-ready:
				f := strings.Fields(line)
				if len(f) != 2 || f[0] != "ready" {
					host.Process.Kill()
					t.Fatalf("host said %q, want \"ready <pid>\"", line)
				}
				pid, _ = strconv.Atoi(f[1])
			case <-time.After(coretest.WaitTimeout):
				host.Process.Kill()
				t.Fatal("the host did not load its plugin")
			}

			if err := host.Process.Kill(); err != nil { // SIGKILL: no Close, no deferred code
				t.Fatal(err)
			}
			_ = host.Wait()

			if err := r.SetReadDeadline(time.Now().Add(coretest.WaitTimeout)); err != nil {
				t.Fatal(err)
			}
			_, err = r.Read(make([]byte, 1))
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				t.Fatalf("plugin process %d still runs %v after its host was killed (%s)", pid, coretest.WaitTimeout, procState(pid))
			case err != io.EOF:
				t.Fatalf("reading the pipe: %v", err)
			}
			// The pipe closes while the process exits; wait for the exit itself.
			if err := waitExit(pid, coretest.WaitTimeout); err != nil {
				t.Fatalf("plugin process %d (state %s) after its host was killed: %v", pid, procState(pid), err)
			}
		})
	}
}

// waitExit waits until process pid (not a child of this one) has exited: its pidfd becomes
// readable then. A process already gone is no error.
func waitExit(pid int, limit time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(limit)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n == 0:
			return errors.New("still running after " + limit.String())
		}
		return nil
	}
}

// procState is the state letter of process pid in /proc (Z: exited, not yet reaped), or
// "gone".
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "gone"
	}
	// pid (comm) state ...: the comm may hold spaces, the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return "unknown"
}

// TestKillLogsNoNoise loads binaries that fail to start and a plugin that crashes: the host
// reports each failure itself, so go-plugin's "plugin failed to exit gracefully" about the
// kill that follows is no warning, and every line names the plugin once (go-plugin's own
// "plugin" attribute, the binary's path, is spelled "path").
func TestKillLogsNoNoise(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, mode := range []string{"not-a-plugin", "wrong-cookie", "bad-manifest"} {
		if _, err := loadHelper(t, mode, WithLogger(log)); err == nil {
			t.Fatalf("%s loaded", mode)
		}
	}
	p, err := loadHelper(t, "ok", WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Event: EventAck, Dialect: "sqlite", Placeholders: PlaceholdersQuestion, Row: Row{ID: idCrash}}
	if _, err := p.Render(context.Background(), r); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	p.Close() // waits for the kill of the crashed process

	pluginKey := regexp.MustCompile(`(^| )plugin=`)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, l := range lines {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "failed to exit gracefully") {
			t.Errorf("a deliberate kill warned: %s", l)
		}
		if n := len(pluginKey.FindAllString(l, -1)); n > 1 {
			t.Errorf("plugin= %d times: %s", n, l)
		}
	}
	if len(lines) < 10 {
		t.Fatalf("only %d log lines: %q", len(lines), buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the logging goroutines of go-plugin.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
