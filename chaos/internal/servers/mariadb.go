package servers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MariaDB client
)

// MariaDB is the suite's own MariaDB server: mariadb-install-db into a directory of the run,
// mariadbd on a loopback port with its own socket, root without a password.
type MariaDB struct {
	Port   int
	dir    string
	server string
	g      *Groups

	mu   sync.Mutex
	proc *Proc
}

// StartMariaDB installs a data directory in dir and starts the server on port.
func StartMariaDB(ctx context.Context, g *Groups, dir string, port int) (*MariaDB, error) {
	server, err := findBin("mariadbd", "/usr/sbin", "/usr/libexec")
	if err != nil {
		if server, err = findBin("mysqld", "/usr/sbin", "/usr/libexec"); err != nil {
			return nil, fmt.Errorf("mariadb: install the MariaDB server (mariadbd, mariadb-install-db): %w", err)
		}
	}
	install, err := findBin("mariadb-install-db", "/usr/bin", "/usr/local/bin")
	if err != nil {
		if install, err = findBin("mysql_install_db", "/usr/bin", "/usr/local/bin"); err != nil {
			return nil, fmt.Errorf("mariadb: install the MariaDB server (mariadb-install-db): %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	m := &MariaDB{Port: port, dir: dir, server: server, g: g}
	args := []string{"--no-defaults", "--datadir=" + m.data(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.CommandContext(ctx, install, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb: %s in %s: %w: %s", filepath.Base(install), m.data(), err, out)
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *MariaDB) data() string { return filepath.Join(m.dir, "data") }

// DSN is the go-sql-driver DSN of database db (empty: none).
func (m *MariaDB) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?parseTime=true", m.Port, db)
}

// Start starts mariadbd and waits until it answers.
func (m *MariaDB) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && !m.proc.Exited() {
		return nil
	}
	args := []string{"--no-defaults", "--datadir=" + m.data(), "--port=" + strconv.Itoa(m.Port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(m.dir, "mariadb.sock"),
		"--pid-file=" + filepath.Join(m.dir, "mariadb.pid"), "--log-error=" + filepath.Join(m.dir, "error.log"),
		"--skip-name-resolve", "--max-connections=500", "--innodb-buffer-pool-size=64M", "--skip-log-bin"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	proc, err := Start(m.g, "mariadbd", exec.Command(m.server, args...), filepath.Join(m.dir, "mariadbd.out"), syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	m.proc = proc
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("mysql", m.DSN(""))
		if err == nil {
			err = db.PingContext(ctx)
			db.Close()
			if err == nil {
				return nil
			}
		}
		if proc.Exited() {
			return fmt.Errorf("mariadbd on port %d exited at start: %v: %s", m.Port, proc.Err(), TailFile(filepath.Join(m.dir, "error.log"), 800))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("mariadbd on port %d did not answer within 60s: %v", m.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops mariadbd: SIGTERM (a clean shutdown) or SIGKILL (a crash; InnoDB recovers at the
// next start).
func (m *MariaDB) Stop(mode StopMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.Exited() {
		return nil
	}
	sig := syscall.SIGTERM
	if mode == Crash {
		sig = syscall.SIGKILL
	}
	_ = m.proc.Signal(sig)
	if !m.proc.Wait(60 * time.Second) {
		m.proc.KillGroup()
		return fmt.Errorf("mariadbd on port %d did not stop within 60s of %v; killed", m.Port, sig)
	}
	m.g.Remove(m.proc.Pid())
	return nil
}

// Restart stops the server in mode and starts it again.
func (m *MariaDB) Restart(ctx context.Context, mode StopMode) error {
	if err := m.Stop(mode); err != nil {
		return err
	}
	return m.Start(ctx)
}

// Close kills the server.
func (m *MariaDB) Close() {
	_ = m.Stop(Crash)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		m.proc.KillGroup()
	}
}
