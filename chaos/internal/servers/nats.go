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

	"github.com/nats-io/nats.go"
)

// NATS is the suite's own nats-server with JetStream, its store in a directory of the run. It
// runs a nats-server the suite built (BuildNATSServer) with sync_interval: always, so a SIGKILL
// loses nothing the server confirmed (2.9 wrote JetStream state asynchronously, and a crash lost
// acknowledgements it had confirmed).
type NATS struct {
	Port   int
	dir    string
	server string
	g      *Groups

	mu   sync.Mutex
	proc *Proc
}

// StartNATS starts the nats-server binary server (2.10 or later) with JetStream on 127.0.0.1:port,
// storing in dir and fsyncing every write (its configuration file is dir/nats.conf).
func StartNATS(ctx context.Context, g *Groups, server, dir string, port int) (*NATS, error) {
	return startNATS(ctx, g, server, dir, natsConfig(port, filepath.Join(dir, "store")), port)
}

// StartNATSNoSync starts the nats-server binary server as StartNATS does, but with JetStream
// writing to disk in the background, as its version does by default: for a server before 2.10,
// which has no setting to sync every write (LegacyNATSServer).
func StartNATSNoSync(ctx context.Context, g *Groups, server, dir string, port int) (*NATS, error) {
	return startNATS(ctx, g, server, dir, natsConfigNoSync(port, filepath.Join(dir, "store")), port)
}

func startNATS(ctx context.Context, g *Groups, server, dir, conf string, port int) (*NATS, error) {
	store := filepath.Join(dir, "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	n := &NATS{Port: port, dir: dir, server: server, g: g}
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// natsConfig is the server's configuration: loopback only, JetStream in store, every write
// fsynced before the server confirms it (sync_interval: always, nats-server 2.10+).
func natsConfig(port int, store string) string {
	return fmt.Sprintf(`listen: "127.0.0.1:%d"
server_name: "settle-chaos-%d"
jetstream {
  store_dir: %s
  sync_interval: always
}
`, port, port, strconv.Quote(store))
}

// natsConfigNoSync is natsConfig without sync_interval (a 2.9 server refuses the setting).
func natsConfigNoSync(port int, store string) string {
	return fmt.Sprintf(`listen: "127.0.0.1:%d"
server_name: "settle-chaos-%d"
jetstream {
  store_dir: %s
}
`, port, port, strconv.Quote(store))
}

// URL is the server's client URL.
func (n *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.Port) }

// Start starts the server and waits until JetStream answers.
func (n *NATS) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.Exited() {
		return nil
	}
	cmd := exec.Command(n.server, "-c", filepath.Join(n.dir, "nats.conf"))
	proc, err := Start(n.g, "nats-server", cmd, filepath.Join(n.dir, "server.log"), syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	n.proc = proc
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := n.ping()
		if err == nil {
			return nil
		}
		if proc.Exited() {
			return fmt.Errorf("nats-server on port %d exited at start: %v: %s", n.Port, proc.Err(), proc.Tail(800))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nats-server on port %d: JetStream did not answer within 30s: %v", n.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *NATS) ping() error {
	nc, err := nats.Connect(n.URL(), nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = nc.Request("$JS.API.INFO", nil, time.Second)
	return err
}

// Stop stops the server: SIGTERM (a clean shutdown) or SIGKILL (a crash).
func (n *NATS) Stop(mode StopMode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.Exited() {
		return nil
	}
	sig := syscall.SIGTERM
	if mode == Crash {
		sig = syscall.SIGKILL
	}
	_ = n.proc.Signal(sig)
	if !n.proc.Wait(30 * time.Second) {
		n.proc.KillGroup()
		return fmt.Errorf("nats-server on port %d did not stop within 30s of %v; killed", n.Port, sig)
	}
	n.g.Remove(n.proc.Pid())
	return nil
}

// Restart stops the server in mode and starts it again.
func (n *NATS) Restart(ctx context.Context, mode StopMode) error {
	if err := n.Stop(mode); err != nil {
		return err
	}
	return n.Start(ctx)
}

// Close kills the server.
func (n *NATS) Close() {
	_ = n.Stop(Crash)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.proc.KillGroup()
	}
}
