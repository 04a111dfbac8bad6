package servers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// RabbitMQ is the suite's own RabbitMQ node: its own node name, AMQP and distribution ports,
// mnesia and log directories, configuration, cookie (HOME) and plugins file, all in a
// directory of the run.
type RabbitMQ struct {
	Port, DistPort int
	Node           string
	dir            string
	server, ctl    string
	g              *Groups

	mu   sync.Mutex
	proc *Proc
}

// StartRabbitMQ starts a node named node on port (AMQP) and distPort (Erlang distribution).
func StartRabbitMQ(ctx context.Context, g *Groups, dir, node string, port, distPort int) (*RabbitMQ, error) {
	// The scripts in /usr/lib/rabbitmq/bin take the RABBITMQ_* environment as given; the
	// wrappers on PATH (Debian's /usr/sbin) switch to the rabbitmq user and lose it.
	server, err := findBin("rabbitmq-server", "/usr/lib/rabbitmq/bin")
	if err == nil && !strings.HasPrefix(server, "/usr/lib/rabbitmq/") {
		if _, e := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); e == nil {
			server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: install the RabbitMQ server (rabbitmq-server, rabbitmqctl): %w", err)
	}
	ctl := filepath.Join(filepath.Dir(server), "rabbitmqctl")
	if _, err := os.Stat(ctl); err != nil {
		return nil, fmt.Errorf("rabbitmq: no rabbitmqctl beside %s: %w", server, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	files := map[string]string{
		"rabbitmq.conf":   fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\n", port),
		"env.conf":        "",
		"enabled_plugins": "[].\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return nil, fmt.Errorf("rabbitmq: %w", err)
		}
	}
	r := &RabbitMQ{Port: port, DistPort: distPort, Node: node, dir: dir, server: server, ctl: ctl, g: g}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// env is the node's environment, shared by the server and rabbitmqctl.
func (r *RabbitMQ) env() []string {
	return append(os.Environ(),
		"HOME="+r.dir, // the node's own Erlang cookie
		"RABBITMQ_NODENAME="+r.Node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(r.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.DistPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "node.pid"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)
}

// URL is the AMQP URL of the node (guest, loopback only).
func (r *RabbitMQ) URL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.Port) }

// Start starts the node and waits until it accepts AMQP connections.
func (r *RabbitMQ) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil && !r.proc.Exited() {
		return nil
	}
	cmd := exec.Command(r.server)
	cmd.Env, cmd.Dir = r.env(), r.dir
	proc, err := Start(r.g, "rabbitmq "+r.Node, cmd, filepath.Join(r.dir, "server.out"), syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	r.proc = proc
	return r.waitReady(ctx, 90*time.Second)
}

func (r *RabbitMQ) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := amqp091.DialConfig(r.URL(), amqp091.Config{Dial: amqp091.DefaultDial(time.Second)})
		if err == nil {
			c.Close()
			return nil
		}
		if r.proc.Exited() {
			return fmt.Errorf("rabbitmq node %s exited at start: %v: %s", r.Node, r.proc.Err(), r.proc.Tail(1500))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("rabbitmq node %s did not accept AMQP connections on port %d within %v: %v", r.Node, r.Port, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ctl runs rabbitmqctl against this node.
func (r *RabbitMQ) Ctl(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.ctl, append([]string{"-n", r.Node}, args...)...)
	cmd.Env, cmd.Dir = r.env(), r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s on %s: %w: %s", strings.Join(args, " "), r.Node, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// CloseConnections makes the node close every client connection (connection.close with
// CONNECTION_FORCED), as an operator would.
func (r *RabbitMQ) CloseConnections(ctx context.Context) error {
	_, err := r.Ctl(ctx, "close_all_connections", "chaos: connection closed by the fault suite")
	return err
}

// RestartApp stops and starts the RabbitMQ application inside the running node: every
// connection drops and the queues are recovered from disk, without restarting the Erlang VM.
func (r *RabbitMQ) RestartApp(ctx context.Context) error {
	if _, err := r.Ctl(ctx, "stop_app"); err != nil {
		return err
	}
	if _, err := r.Ctl(ctx, "start_app"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitReady(ctx, 60*time.Second)
}

// Stop stops the node: rabbitmqctl stop (graceful) or SIGKILL of the Erlang VM (crash).
func (r *RabbitMQ) Stop(ctx context.Context, mode StopMode) error {
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc == nil || proc.Exited() {
		return nil
	}
	if mode == Graceful {
		if _, err := r.Ctl(ctx, "stop"); err != nil {
			return err
		}
	} else {
		b, err := os.ReadFile(filepath.Join(r.dir, "node.pid"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil {
			return fmt.Errorf("rabbitmq node %s: reading its pid file: %v %v", r.Node, err, perr)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !proc.Wait(60 * time.Second) {
		proc.KillGroup()
		return fmt.Errorf("rabbitmq node %s did not stop within 60s; killed", r.Node)
	}
	// What the VM started (erl_child_setup, inet_gethost) goes with the group.
	proc.KillGroup()
	return nil
}

// Restart stops the node in mode and starts it again.
func (r *RabbitMQ) Restart(ctx context.Context, mode StopMode) error {
	if err := r.Stop(ctx, mode); err != nil {
		return err
	}
	return r.Start(ctx)
}

// Close kills the node.
func (r *RabbitMQ) Close() {
	_ = r.Stop(context.Background(), Crash)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.KillGroup()
	}
}
