package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// ownMariaDBPort is the loopback port of the MariaDB the recovery test starts and restarts
// itself (the shared server is never restarted).
const ownMariaDBPort = 33311

// ownMariaDB is a MariaDB of the test's own: mariadb-install-db in a directory of its own,
// mariadbd on a loopback port and a socket there, run as the mysql user, grant tables skipped
// (root without a password from anywhere: a throwaway server on loopback).
type ownMariaDB struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	exit chan error
}

func startOwnMariaDB(t *testing.T) *ownMariaDB {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				t.Skipf("no %s: the recovery test starts a MariaDB of its own", bin)
			}
		}
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		t.Skipf("no mysql user to run a MariaDB of the test's own as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "settle-mariadb-recovery-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	m := &ownMariaDB{t: t, dir: dir}
	install := exec.Command(lookSbin("mariadb-install-db"), "--no-defaults", "--datadir="+m.data(), "--user=mysql",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db in %s: %v: %s", m.data(), err, out)
	}
	m.start()
	t.Cleanup(m.stop)
	return m
}

func lookSbin(bin string) string {
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	return "/usr/sbin/" + bin
}

func (m *ownMariaDB) data() string { return filepath.Join(m.dir, "data") }

func (m *ownMariaDB) dsn(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?parseTime=true", ownMariaDBPort, db)
}

// start starts mariadbd and returns when it accepts connections: the moment the recovery
// bound is measured from.
func (m *ownMariaDB) start() time.Time {
	m.t.Helper()
	m.cmd = exec.Command(lookSbin("mariadbd"), "--no-defaults", "--datadir="+m.data(), "--user=mysql",
		"--port="+strconv.Itoa(ownMariaDBPort), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "mariadb.sock"),
		"--pid-file="+filepath.Join(m.dir, "mariadb.pid"), "--skip-grant-tables", "--skip-log-bin",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2",
		"--max-connections=200", "--log-error="+filepath.Join(m.dir, "error.log"))
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("starting mariadbd: %v", err)
	}
	m.exit = make(chan error, 1)
	go func() { m.exit <- m.cmd.Wait() }()
	// Polling the server's own readiness: there is no event to wait on from outside it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := func() error {
			c, err := sql.Open("mysql", m.dsn(""))
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return c.PingContext(ctx)
		}()
		if err == nil {
			return time.Now()
		}
		select {
		case werr := <-m.exit:
			out, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			m.t.Fatalf("mariadbd exited at start: %v: %s", werr, out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mariadbd on port %d did not accept connections within 60s: %v", ownMariaDBPort, err)
		}
	}
}

// stop shuts mariadbd down (SIGTERM: a normal shutdown that ends its sessions) and waits.
func (m *ownMariaDB) stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exit:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exit
	}
	m.cmd = nil
}

// TestRecoveryAfterRestart restarts a MariaDB of the test's own under a subscription of each
// form: every one settles again within a second of the server accepting connections. (The
// advisory form took 8.8 s: each stale dedicated connection failed one claim and raised the
// subscription's backoff; and claims failing while the server restarted backed core off for up
// to five seconds.)
func TestRecoveryAfterRestart(t *testing.T) {
	srv := startOwnMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup, err := sql.Open("mysql", srv.dsn(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.ExecContext(ctx, "CREATE DATABASE recovery"); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	db, err := Open(ctx, srv.dsn("recovery"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Pool().SetMaxOpenConns(40)
	tb := sqlqueue.StandardTable("recovery")
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	forms := map[string]func(*DB, sqlqueue.Table, string) (core.Endpoint, error){
		"lease": Lease, "rowlock": RowLock, "advisory": Advisory,
	}
	settled := make(chan string, 16)
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		core.WithObserver(func(s core.Settlement) {
			if s.Err == nil {
				settled <- s.Queue
			}
		}))
	app.Register(db)
	pubs := map[string]*sqlqueue.Publisher{}
	for name, ep := range forms {
		e, err := ep(db, tb, name)
		if err != nil {
			t.Fatal(err)
		}
		// Polling often, so that the subscriptions meet the outage: each claim in it fails.
		if err := core.Subscribe(app, e, func(context.Context, *core.Message[string]) error { return nil },
			core.Name(name), core.Workers(6), sqlqueue.PollInterval(50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if pubs[name], err = NewPublisher(db, tb, name); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	round := func(what string, from time.Time) {
		t.Helper()
		for name, p := range pubs {
			// A pooled connection of the old server fails one publish (ErrConnLost), as it
			// would for the service; the publisher tries again, as the service would.
			for try := 0; ; try++ {
				_, err := sqlqueue.Publish(ctx, p, what)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrConnLost) || try == 20 {
					t.Fatalf("publishing to %s: %v", name, err)
				}
			}
		}
		seen := map[string]time.Duration{}
		for len(seen) < len(pubs) {
			select {
			case q := <-settled:
				if _, ok := seen[q]; !ok {
					seen[q] = time.Since(from)
				}
			case <-ctx.Done():
				t.Fatalf("%s: settled %v of %d forms", what, seen, len(pubs))
			}
		}
		for q, d := range seen {
			t.Logf("%s: %s settled %v after the server accepted connections", what, q, d.Round(time.Millisecond))
			if what != "before" && d > time.Second {
				t.Errorf("%s: the %s form settled %v after the server accepted connections; want within 1s", what, q, d.Round(time.Millisecond))
			}
		}
	}
	round("before", time.Now())
	// The outage lasts as long as a restart of a busy server can: the scenario's length, not a
	// wait for an effect.
	for _, restart := range []string{"restart 1", "restart 2"} {
		srv.stop()
		<-time.After(3 * time.Second)
		ready := srv.start()
		round(restart, ready)
	}
}
