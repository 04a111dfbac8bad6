package trial

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
)

// worker is one chaos-worker process of a trial, restarted under the same name.
type worker struct {
	t    *run
	name string
	args []string

	mu       sync.Mutex
	proc     *servers.Proc
	starts   int
	since    time.Time     // when the current process started
	backoff  time.Duration // before the next restart of a worker that keeps exiting soon after its start
	killed   bool          // the driver killed or stopped it on purpose: not an unexpected exit
	stopped  bool          // SIGSTOPped
	finished bool          // stopped for good at the end of the trial
}

// startWorker starts a worker process named name with the trial's arguments plus extra.
func (t *run) startWorker(name string, extra ...string) (*worker, error) {
	w := &worker{t: t, name: name, args: append(append(t.workerArgs(name), t.sc.WorkerFlags...), extra...)}
	if err := w.start(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.workers = append(t.workers, w)
	t.mu.Unlock()
	return w, nil
}

func (w *worker) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.starts++
	cmd := exec.Command(w.t.env.WorkerBin, w.args...)
	cmd.Env = os.Environ()
	logPath := filepath.Join(w.t.dir, w.name+".log")
	p, err := servers.Start(w.t.env.Groups, "worker "+w.name, cmd, logPath, syscall.SIGKILL)
	if err != nil {
		return err
	}
	w.proc, w.killed, w.stopped, w.since = p, false, false, time.Now()
	return nil
}

// waitReady waits until the current process reports its subscription open.
func (w *worker) waitReady(d time.Duration) error {
	w.mu.Lock()
	p := w.proc
	w.mu.Unlock()
	deadline := time.Now().Add(d)
	for !w.t.st.isReady(p.Pid()) {
		if p.Exited() {
			return fmt.Errorf("worker %s exited before it was ready (%v): %s", w.name, p.Err(), p.Tail(1200))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %s not ready within %v: %s", w.name, d, p.Tail(1200))
		}
		time.Sleep(20 * time.Millisecond)
		w.t.st.poll()
	}
	return nil
}

// kill sends SIGKILL to the worker process (only the process: what it started stays, so
// the plugin trial can see whether it outlives its host) and waits for it.
func (w *worker) kill() {
	w.mu.Lock()
	p := w.proc
	w.killed = true
	w.mu.Unlock()
	_ = p.Signal(syscall.SIGKILL)
	p.Wait(10 * time.Second)
	w.t.env.Groups.Remove(p.Pid())
}

// pause stops the worker (SIGSTOP) or resumes it (SIGCONT).
func (w *worker) pause(stop bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	w.stopped = stop
	_ = w.proc.Signal(sig)
}

// restart starts the worker again after it exited.
func (w *worker) restart() error {
	return w.start()
}

// terminate stops the worker for good: SIGTERM (a graceful stop), then SIGKILL of its whole
// group when it has not exited within grace. It reports whether the stop was graceful.
func (w *worker) terminate(grace time.Duration) bool {
	w.mu.Lock()
	p := w.proc
	w.finished, w.killed = true, true
	stopped := w.stopped
	w.mu.Unlock()
	if p.Exited() {
		p.KillGroup()
		return true
	}
	if stopped {
		_ = p.Signal(syscall.SIGCONT)
	}
	_ = p.Signal(syscall.SIGTERM)
	ok := p.Wait(grace)
	p.KillGroup()
	return ok
}

// supervise restarts workers that exited without the driver killing them (a self kill, a
// poison pill, a start-up failure while the server was down) until stop is closed, at most
// limit restarts per trial.
func (t *run) supervise(stop <-chan struct{}, limit int) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	restarts := 0
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		ws := append([]*worker(nil), t.workers...)
		t.mu.Unlock()
		for _, w := range ws {
			w.mu.Lock()
			p, killed, finished, refused := w.proc, w.killed, w.finished, w.t.refusedWorker == w
			w.mu.Unlock()
			if finished || killed || refused || !p.Exited() {
				continue
			}
			t.env.Groups.Remove(p.Pid())
			t.st.poll()
			reason := t.st.exitReason(p.Pid())
			if reason == "" {
				reason = describeExit(p)
			}
			_ = t.ledger.Write(chaos.Entry{Ev: chaos.EvExit, Detail: w.name, Outcome: reason})
			if restarts >= limit {
				t.fail(ErrorCat, "worker %s exited (%s) and the restart limit %d was reached: %s", w.name, reason, limit, p.Tail(600))
				w.mu.Lock()
				w.finished = true
				w.mu.Unlock()
				continue
			}
			restarts++
			// A worker that keeps dying soon after its start (a poison pill, a server that is
			// down) is restarted after a backoff that doubles to 1 s, as a supervisor would.
			w.mu.Lock()
			if time.Since(w.since) < 2*time.Second {
				w.backoff = min(max(2*w.backoff, 50*time.Millisecond), time.Second)
			} else {
				w.backoff = 0
			}
			wait := w.backoff
			w.mu.Unlock()
			time.Sleep(wait)
			if err := w.restart(); err != nil {
				t.fail(ErrorCat, "restarting worker %s: %v", w.name, err)
			}
		}
	}
}

func describeExit(p *servers.Proc) string {
	if ee, ok := p.Err().(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return "exit status " + strconv.Itoa(ee.ExitCode()) + ": " + lastLine(p.Tail(400))
	}
	if p.Err() == nil {
		return "exit status 0"
	}
	return p.Err().Error()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// orphans lists processes still running the binary path (plugin processes that outlived their
// host), by pid.
func orphans(path string) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe"))
		if err != nil {
			continue
		}
		if strings.TrimSuffix(exe, " (deleted)") == path {
			out = append(out, pid)
		}
	}
	return out
}
