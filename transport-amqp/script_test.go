package amqp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// scriptWithin runs ci/rabbitmq-cluster.sh with args and gives up after d: the script and the
// rabbitmqctl calls it waits on run in a process group of their own, killed when d runs out
// (the nodes it started run in groups of their own and are stopped by the test's cleanup).
func (ns *nodes) scriptWithin(d time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join("..", "ci", "rabbitmq-cluster.sh")}, args...)...)
	cmd.Env = append(os.Environ(), ns.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), ctx.Err()
	}
	return string(out), err
}

// Issue 42, item 10: `ci/rabbitmq-cluster.sh start` on the data directories of a cluster that
// ran before used to hang: node 1 started first and waited for the peers it had known, which the
// script started only after node 1 answered. Started again on its own data, the cluster is up
// within two minutes, every node running.
func TestClusterStartsAgainOnItsData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node RabbitMQ cluster twice (~1 min)")
	}
	const port = 5694
	ns := startNodes(t, 3, port, "settle-amqp-d")
	if out, err := ns.script("stop", ns.dir); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	start := time.Now()
	out, err := ns.scriptWithin(2*time.Minute, "start", ns.dir, "3", strconv.Itoa(port), strconv.Itoa(port+20000), "settle-amqp-d")
	if err != nil {
		t.Fatalf("start again on the cluster's data: %v after %v\n%s", err, time.Since(start).Round(time.Second), out)
	}
	t.Logf("started again on its data in %v", time.Since(start).Round(time.Second))
	for _, u := range ns.urls {
		c, err := amqp091.Dial(u)
		if err != nil {
			t.Errorf("node at %s does not accept connections: %v", u, err)
			continue
		}
		_ = c.Close()
	}
}
