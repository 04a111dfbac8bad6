package servers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is the suite's own PostgreSQL cluster: initdb in a directory of the run, the
// postmaster on a loopback port, trust authentication for the postgres user.
type Postgres struct {
	Port int
	dir  string
	bin  string // directory of initdb and postgres
	cred *syscall.Credential
	g    *Groups

	mu   sync.Mutex
	proc *Proc
}

// StartPostgres creates a cluster in dir and starts it on port.
func StartPostgres(ctx context.Context, g *Groups, dir string, port int) (*Postgres, error) {
	initdb, err := findBin("initdb", "/usr/lib/postgresql/*/bin")
	if err != nil {
		return nil, fmt.Errorf("postgres: install the PostgreSQL server (initdb, postgres): %w", err)
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	bin := filepath.Dir(initdb)
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, fmt.Errorf("postgres: no postgres binary beside %s: %w", initdb, err)
	}
	cred, _, err := runAs("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := chownTree(dir, cred); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	p := &Postgres{Port: port, dir: dir, bin: bin, cred: cred, g: g}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("postgres: initdb in %s: %w: %s", p.data(), err, out)
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// URL is the connection URL of database db.
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Port, db)
}

// Start starts the postmaster and waits until it accepts queries.
func (p *Postgres) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil && !p.proc.Exited() {
		return nil
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data(), "-p", strconv.Itoa(p.Port),
		"-k", p.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		"-c", "shared_buffers=32MB", "-c", "log_min_messages=warning", "-c", "fsync=on")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	proc, err := Start(p.g, "postgres", cmd, filepath.Join(p.dir, "postgres.log"), syscall.SIGQUIT)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	p.proc = proc
	return p.waitReady(ctx, 30*time.Second)
}

func (p *Postgres) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := pgx.Connect(ctx, p.URL("postgres"))
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
			if err == nil {
				return nil
			}
		}
		if p.proc.Exited() {
			return fmt.Errorf("postgres on port %d exited at start: %v: %s", p.Port, p.proc.Err(), p.proc.Tail(800))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("postgres on port %d did not accept queries within %v: %v", p.Port, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopMode is how a server is stopped.
type StopMode string

const (
	// Graceful: PostgreSQL's fast shutdown (SIGINT: roll back, checkpoint), MariaDB's
	// SIGTERM, RabbitMQ's rabbitmqctl stop.
	Graceful StopMode = "graceful"
	// Crash: PostgreSQL's immediate shutdown (SIGQUIT: no checkpoint, crash recovery at the
	// next start); SIGKILL for MariaDB and RabbitMQ.
	Crash StopMode = "crash"
)

// Stop stops the postmaster (fast or immediate) and waits for it.
func (p *Postgres) Stop(mode StopMode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.proc.Exited() {
		return nil
	}
	sig := syscall.SIGINT
	if mode == Crash {
		sig = syscall.SIGQUIT
	}
	_ = p.proc.Signal(sig)
	if !p.proc.Wait(30 * time.Second) {
		p.proc.KillGroup()
		return fmt.Errorf("postgres on port %d did not stop within 30s of %v; killed", p.Port, sig)
	}
	p.g.Remove(p.proc.Pid())
	return nil
}

// Restart stops the server in mode and starts it again.
func (p *Postgres) Restart(ctx context.Context, mode StopMode) error {
	if err := p.Stop(mode); err != nil {
		return err
	}
	return p.Start(ctx)
}

// Close stops the server at once.
func (p *Postgres) Close() {
	_ = p.Stop(Crash)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		p.proc.KillGroup()
	}
}
