// Package servers starts and stops the chaos suite's own database and broker servers: a
// PostgreSQL cluster, a MariaDB server, a RabbitMQ node (and a NATS server), each on a loopback
// port from the suite's range and with its data in a directory of the run. The suite restarts,
// kills and cuts only these, never a shared server.
package servers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Groups records the process groups the run started, one "pgid name" per line in a file, so
// that a shell trap can end them if the driver itself is killed (ci/chaos.sh does).
type Groups struct {
	mu   sync.Mutex
	path string
	live map[int]string
}

// NewGroups records process groups in the file at path.
func NewGroups(path string) *Groups { return &Groups{path: path, live: make(map[int]string)} }

// Add records a started process group.
func (g *Groups) Add(pgid int, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[pgid] = name
	g.save()
}

// Remove forgets a process group that has ended.
func (g *Groups) Remove(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, pgid)
	g.save()
}

// KillAll sends SIGKILL to every recorded process group that is still there.
func (g *Groups) KillAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pgid := range g.live {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		delete(g.live, pgid)
	}
	g.save()
}

func (g *Groups) save() {
	var b strings.Builder
	for pgid, name := range g.live {
		fmt.Fprintf(&b, "%d %s\n", pgid, name)
	}
	_ = os.WriteFile(g.path, []byte(b.String()), 0o644)
}

// Proc is a started process in a process group of its own, with its output in a log file.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
	g    *Groups
}

// Start runs cmd in a new process group, its output appended to logPath, recorded in g. When
// the driver dies the process receives deathSig (0: none).
func Start(g *Groups, name string, cmd *exec.Cmd, logPath string, deathSig syscall.Signal) (*Proc, error) {
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = deathSig
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{}), g: g}
	g.Add(cmd.Process.Pid, name)
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the process's exit error, once Done is closed.
func (p *Proc) Err() error { return p.err }

// Pid is the process id (and its process group id).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return syscall.Kill(p.Pid(), sig)
}

// Wait waits up to d for the process to exit; false when it did not.
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// KillGroup sends SIGKILL to the process's whole group (what it left behind included) and
// waits for the process.
func (p *Proc) KillGroup() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	p.Wait(10 * time.Second)
	p.g.Remove(p.Pid())
}

// Tail returns the last n bytes of the process's log, for errors.
func (p *Proc) Tail(n int) string { return TailFile(p.Log, n) }

// TailFile returns the last n bytes of a file.
func TailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// CheckLoopback refuses an address whose host is not a loopback address (127.0.0.0/8, ::1 or
// localhost): the suite restarts, kills and cuts only its own servers.
func CheckLoopback(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("address %q is not a loopback address: the chaos suite only targets its own servers on 127.0.0.1", hostport)
}

// FreePort returns the first port in [lo, hi] on which nothing listens on 127.0.0.1.
func FreePort(lo, hi int) (int, error) {
	for p := lo; p <= hi; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d on 127.0.0.1 (a chaos run still going, or servers left behind?)", lo, hi)
}

// runAs returns the credential to run a server as the named system user when this process is
// root (servers that refuse to run as root), and nil otherwise.
func runAs(name string) (*syscall.Credential, *user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, nil, fmt.Errorf("running as root, the server must run as the system user %q, which does not exist: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, u, nil
}

// chownTree gives dir and everything under it to cred's user.
func chownTree(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(cred.Uid), int(cred.Gid))
	})
}

// findBin finds a server binary: on PATH, or in one of dirs (globs allowed, last match wins,
// so the newest versioned directory is preferred).
func findBin(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var found string
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				found = m
			}
		}
	}
	if found == "" {
		return "", fmt.Errorf("%s: %w (looked on PATH and in %s)", name, ErrNoBinary, strings.Join(dirs, ", "))
	}
	return found, nil
}

// ErrNoBinary is returned when a server's binaries are not installed.
var ErrNoBinary = errors.New("server binary not found")
