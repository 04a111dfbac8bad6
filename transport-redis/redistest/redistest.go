// Package redistest runs redis-server processes of its own for tests that need a clean, a
// restartable or a killable server: each on a free loopback port, in a directory of its own,
// with the append-only file on and fsynced at every write (appendfsync always) unless told.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary is the redis-server the package starts: $SETTLE_REDIS_SERVER, or redis-server on PATH.
func Binary() (string, error) {
	if b := os.Getenv("SETTLE_REDIS_SERVER"); b != "" {
		return exec.LookPath(b) // an executable that is not there is no binary
	}
	return exec.LookPath("redis-server")
}

// Server is one redis-server process.
type Server struct {
	bin, dir, fsync string
	extra           string // more configuration lines
	port            int
	cmd             *exec.Cmd
	exited          chan error
}

// Start runs a redis-server in dir (its data and log live there) on a free loopback port, with
// appendfsync set to fsync ("always", "everysec" or "no"), and waits until it answers.
func Start(dir, fsync string) (*Server, error) {
	return start(dir, fsync, "")
}

func start(dir, fsync, extra string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server binary (set SETTLE_REDIS_SERVER): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{bin: bin, dir: dir, fsync: fsync, extra: extra, port: port}
	return s, s.Restart()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(s.port) + "/0" }

// Restart starts the server again on the same port and directory (after Kill or Stop) and
// waits until it answers, its append-only file loaded.
func (s *Server) Restart() error {
	conf := filepath.Join(s.dir, "redis.conf")
	lines := "port " + strconv.Itoa(s.port) + "\nbind 127.0.0.1\ndir " + s.dir +
		"\nappendonly yes\nappendfsync " + s.fsync + "\nsave \"\"\nlogfile " + filepath.Join(s.dir, "redis.log") + "\n" + s.extra
	if err := os.WriteFile(conf, []byte(lines), 0o600); err != nil {
		return err
	}
	s.cmd = exec.Command(s.bin, conf)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	s.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(s.cmd, s.exited)
	return s.waitReady(10 * time.Second)
}

func (s *Server) waitReady(within time.Duration) error {
	opts, _ := redis.ParseURL(s.URL())
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case e := <-s.exited:
			return fmt.Errorf("redistest: redis-server exited at start: %v (log: %s)", e, s.logTail())
		case <-time.After(20 * time.Millisecond): // polling a process that gives no signal when ready
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on port %d not ready within %v: %w (log: %s)", s.port, within, err, s.logTail())
		}
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to exit.
func (s *Server) Kill() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return errors.New("redistest: not running")
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	<-s.exited
	s.cmd = nil
	return nil
}

// Stop kills the server if it runs; for cleanup.
func (s *Server) Stop() {
	if s.cmd != nil {
		_ = s.Kill()
	}
}

// logTail returns the last lines of the server's log, for errors.
func (s *Server) logTail() string {
	f, err := os.Open(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 5 {
			lines = lines[1:]
		}
	}
	return fmt.Sprint(lines)
}
