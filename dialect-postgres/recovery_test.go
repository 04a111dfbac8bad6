package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

// ownPostgresPort is the loopback port of the PostgreSQL the recovery test starts and restarts
// itself (the shared server is never restarted).
const ownPostgresPort = 55441

// ownPostgres is a PostgreSQL cluster of the test's own: initdb in a directory of its own, the
// postmaster on a loopback port, run as the postgres user, trust authentication.
type ownPostgres struct {
	t    *testing.T
	dir  string
	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	exit chan error
}

func startOwnPostgres(t *testing.T) *ownPostgres {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) == 0 {
			t.Skip("no initdb on PATH or in /usr/lib/postgresql/*/bin: the recovery test starts a PostgreSQL of its own")
		}
		initdb = matches[len(matches)-1]
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to run a PostgreSQL of the test's own as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "settle-pg-recovery-")
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
	p := &ownPostgres{t: t, dir: dir, bin: filepath.Dir(initdb), cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd := exec.Command(initdb, "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb in %s: %v: %s", p.data(), err, out)
	}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *ownPostgres) data() string { return filepath.Join(p.dir, "data") }

func (p *ownPostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", ownPostgresPort)
}

// start starts the postmaster and returns when it accepts connections: the moment the
// recovery bound is measured from.
func (p *ownPostgres) start() time.Time {
	p.t.Helper()
	p.cmd = exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data(), "-p", strconv.Itoa(ownPostgresPort), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100", "-c", "shared_buffers=16MB", "-c", "fsync=off")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	log, err := os.Create(filepath.Join(p.dir, "postgres.log"))
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting postgres: %v", err)
	}
	p.exit = make(chan error, 1)
	go func() { p.exit <- p.cmd.Wait(); log.Close() }()
	// Polling the server's own readiness: there is no event to wait on from outside it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, p.url())
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		cancel()
		if err == nil {
			return time.Now()
		}
		select {
		case werr := <-p.exit:
			out, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
			p.t.Fatalf("postgres exited at start: %v: %s", werr, out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("postgres on port %d did not accept connections within 30s: %v", ownPostgresPort, err)
		}
	}
}

// stop shuts the postmaster down (fast: its sessions are terminated) and waits for it.
func (p *ownPostgres) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exit:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exit
	}
	p.cmd = nil
}

// TestRecoveryAfterRestart restarts a PostgreSQL of the test's own under a subscription of each
// form: every one settles again within a second of the server accepting connections. (The
// advisory form took 1.5 s: each of its stale dedicated connections failed one claim and
// raised the subscription's backoff; and a claim failing while the server restarted backed core
// off for up to five seconds.)
func TestRecoveryAfterRestart(t *testing.T) {
	srv := startOwnPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := postgres.Open(ctx, srv.url()+"&pool_max_conns=20")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tb := sqlqueue.StandardTable("recovery")
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	forms := map[string]func(*postgres.DB, sqlqueue.Table, string) (core.Endpoint, error){
		"lease": postgres.Lease, "rowlock": postgres.RowLock, "advisory": postgres.Advisory,
	}
	settled := make(chan string, 16)
	app := core.New(core.WithoutSignals(), core.WithLogger(testLogger()), core.WithObserver(func(s core.Settlement) {
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
		if pubs[name], err = postgres.NewPublisher(db, tb, name); err != nil {
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
				if !errors.Is(err, postgres.ErrConnLost) || try == 20 {
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
