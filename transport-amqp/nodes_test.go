package amqp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// nodes are RabbitMQ nodes of a test's own, started by ci/rabbitmq-cluster.sh on the AMQP
// helper's loopback ports (AMQP 5690-5699, distribution 25690-25699) and torn down when the
// test ends, failed or not.
type nodes struct {
	t    *testing.T
	dir  string
	env  []string // for the script: the plugins to enable
	urls []string
}

// startNodes starts n nodes (joined into one cluster when n > 1) named name-1@localhost, … on
// AMQP ports from port and distribution ports from port+20000, with plugins enabled (the
// management plugin listens at the AMQP port + 10000). Without a RabbitMQ server installed the
// test skips (fails under SETTLE_REQUIRE_SERVERS=1).
func startNodes(t *testing.T, n, port int, name string, plugins ...string) *nodes {
	t.Helper()
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
		if _, err := exec.LookPath("rabbitmq-server"); err != nil {
			coretest.ServerUnavailable(t, "a RabbitMQ installation to start nodes of the test's own", "rabbitmq-server", err)
		}
	}
	dir, err := os.MkdirTemp("", "settle-amqp-nodes-")
	if err != nil {
		t.Fatal(err)
	}
	ns := &nodes{t: t, dir: dir, env: []string{"SETTLE_RABBITMQ_PLUGINS=" + strings.Join(plugins, ",")}}
	t.Cleanup(func() {
		_, _ = ns.script("stop", dir)
		if t.Failed() {
			t.Logf("node directories kept for inspection: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	start := time.Now()
	out, err := ns.script("start", dir, strconv.Itoa(n), strconv.Itoa(port), strconv.Itoa(port+20000), name)
	if err != nil {
		t.Fatalf("start %d RabbitMQ nodes: %v\n%s", n, err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "amqp://") {
			ns.urls = append(ns.urls, l)
		}
	}
	if len(ns.urls) != n {
		t.Fatalf("started %d nodes, want %d:\n%s", len(ns.urls), n, out)
	}
	t.Logf("%d RabbitMQ node(s) %s-* up in %v: %v", n, name, time.Since(start).Round(time.Second), ns.urls)
	return ns
}

func (ns *nodes) script(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "ci", "rabbitmq-cluster.sh")}, args...)...)
	cmd.Env = append(os.Environ(), ns.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// do runs a node command (stop-node, kill-node, start-node) on node i (from 1).
func (ns *nodes) do(cmd string, i int) {
	ns.t.Helper()
	start := time.Now()
	if out, err := ns.script(cmd, ns.dir, strconv.Itoa(i)); err != nil {
		ns.t.Fatalf("%s %d: %v\n%s", cmd, i, err, out)
	}
	ns.t.Logf("%s %d: %v", cmd, i, time.Since(start).Round(100*time.Millisecond))
}

// leader returns the index (from 1) of the node holding queue's leader, 0 when unknown.
func (ns *nodes) leader(queue string) int {
	out, _ := ns.script("leader", ns.dir, queue)
	name := strings.TrimSpace(out)
	if i := strings.LastIndexByte(strings.SplitN(name, "@", 2)[0], '-'); i >= 0 {
		n, _ := strconv.Atoi(name[i+1 : strings.IndexByte(name, '@')])
		return n
	}
	return 0
}

// trialMix is the message mix of the broker-restart and cluster trials, by id % 100: 80% acked
// at once, 10% retried once, 5% retried after 200ms once (through the waiting queue), 5% always
// retried (dead-lettered at the cap of 3).
func trialMix(id int) string {
	switch r := id % 100; {
	case r < 80:
		return "ack"
	case r < 90:
		return "retry"
	case r < 95:
		return "later"
	}
	return "dead"
}

const trialCap = 3

// trialHandler handles a trial message by its mix, counting its runs in l.
func trialHandler(l *ledger, work time.Duration) func(context.Context, *core.Message[string]) error {
	return func(ctx context.Context, m *core.Message[string]) error {
		id, err := strconv.Atoi(m.Payload)
		if err != nil {
			return core.Drop()
		}
		l.ran(m.Delivery().(interface{ Queue() string }).Queue(), id)
		// The handler's work: the drain takes long enough that the broker goes down in the
		// middle of it. A handler cancelled meanwhile gives its delivery up.
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return ctx.Err()
		}
		first := m.Headers()[amqp.RetryCountHeader] == "" && m.Attempt() == 1
		switch trialMix(id) {
		case "retry":
			if first {
				return core.Retry()
			}
		case "later":
			if m.Headers()[amqp.RetryCountHeader] == "" {
				return core.RetryAfter(200 * time.Millisecond)
			}
		case "dead":
			return core.Retry()
		}
		return nil
	}
}

// seed publishes ids [from, to) to queue with a bare client, persistent and confirmed.
func seed(t *testing.T, url, queue string, from, to int) {
	t.Helper()
	c, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pending []*amqp091.DeferredConfirmation
	for id := from; id < to; id++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp091.Publishing{
			Body: []byte(strconv.Itoa(id)), MessageId: fmt.Sprintf("%s-%d", queue, id), DeliveryMode: amqp091.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, dc)
		if len(pending) == 500 || id == to-1 {
			for _, dc := range pending {
				if ok, err := dc.WaitContext(ctx); !ok || err != nil {
					t.Fatalf("seed %s: not confirmed: %v", queue, err)
				}
			}
			pending = pending[:0]
		}
	}
}

// bareDrain takes every message of queue with a bare client (Get until empty).
func bareDrain(t *testing.T, url, queue string) []amqp091.Delivery {
	t.Helper()
	c, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var out []amqp091.Delivery
	for {
		m, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("drain %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, m)
		if err := ch.Ack(m.DeliveryTag, false); err != nil {
			t.Fatal(err)
		}
	}
}

// ledger records what a trial's App settled, by queue and message id.
type ledger struct {
	changed chan struct{} // a token after every settlement

	mu     sync.Mutex
	runs   map[string]map[int]int      // queue → id → handler runs
	acked  map[string]map[int]int      // queue → id → successful acknowledgements
	dead   map[string]map[int]int      // queue → id → successful dead-letter moves
	failed int                         // settlements that failed (the message comes back)
	trail  map[string]map[int][]string // queue → id → every settlement, for a failure's report
}

func newLedger() *ledger {
	return &ledger{runs: map[string]map[int]int{}, acked: map[string]map[int]int{}, dead: map[string]map[int]int{},
		trail: map[string]map[int][]string{}, changed: make(chan struct{}, 1)}
}

// ran counts a handler run of id on queue.
func (l *ledger) ran(queue string, id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs[queue] == nil {
		l.runs[queue] = map[int]int{}
	}
	l.runs[queue][id]++
}

func (l *ledger) observe(st core.Settlement) {
	id, err := strconv.Atoi(string(st.Delivery.Body()))
	if err != nil {
		return
	}
	defer func() {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.trail[st.Queue] == nil {
		l.trail[st.Queue] = map[int][]string{}
	}
	l.trail[st.Queue][id] = append(l.trail[st.Queue][id], fmt.Sprintf("%s attempt %d epoch %d err=%v",
		st.Verdict, st.Delivery.Attempt(), amqp.Epoch(st.Delivery), st.Err))
	if st.Err != nil {
		l.failed++
		return
	}
	var m map[string]map[int]int
	switch st.Verdict.Action {
	case core.ActAck:
		m = l.acked
	case core.ActDeadLetter:
		m = l.dead
	default:
		return
	}
	if m[st.Queue] == nil {
		m[st.Queue] = map[int]int{}
	}
	m[st.Queue][id]++
}

// finished counts the ids of queue that reached a final state in the App.
func (l *ledger) finished(queue string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.acked[queue])
	for id := range l.dead[queue] {
		if l.acked[queue][id] == 0 {
			n++
		}
	}
	return n
}

// waitFinished waits until queue has n ids finished, or fails after d.
func (l *ledger) waitFinished(t *testing.T, queue string, n int, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for l.finished(queue) < n {
		select {
		case <-l.changed:
		case <-timeout:
			l.mu.Lock()
			shown := 0
			for id := 0; shown < 10 && id < 1<<20; id++ {
				if tr, ok := l.trail[queue][id]; ok && l.acked[queue][id] == 0 && l.dead[queue][id] == 0 {
					t.Logf("unfinished %d: %v", id, tr)
					shown++
				}
			}
			l.mu.Unlock()
			t.Fatalf("queue %s: %d of %d messages finished after %v", queue, l.finished(queue), n, d)
		}
	}
}

// trialRow is one line of a trial's table.
type trialRow struct {
	Kind                                    string
	Messages, Acked, DeadLetters, WithCount int
	Duplicates, DeadByRestarts, Lost        int
	// EarlyDead counts messages that always fail dead-lettered after fewer handler runs than
	// the cap (attempts counted that no handler ran).
	EarlyDead int
}

// check reads the dead-letter queue and what is left with a bare client and compares them with
// the ledger: every id acknowledged or in the dead letter (with its count), none lost.
func (l *ledger) check(t *testing.T, url, kind, queue, dead string, total int) trialRow {
	t.Helper()
	row := trialRow{Kind: kind, Messages: total}
	left := bareDrain(t, url, queue)
	if len(left) != 0 {
		t.Errorf("%s: %d messages still in %s", kind, len(left), queue)
	}
	inDead := map[int]int{}
	for _, m := range bareDrain(t, url, dead) {
		id, _ := strconv.Atoi(string(m.Body))
		inDead[id]++
		row.DeadLetters++
		h := map[string]string{}
		for k, v := range m.Headers {
			if s, ok := v.(string); ok {
				h[k] = s
			}
		}
		info, ok, err := core.ParseDeadLetterInfo(h)
		if ok && err == nil && info.Count >= trialCap {
			row.WithCount++
		} else {
			t.Errorf("%s: dead letter %d without its count: %v (%v, %v)", kind, id, m.Headers, ok, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := 0; id < total; id++ {
		a, d := l.acked[queue][id], inDead[id]
		if a > 0 {
			row.Acked++
		}
		if a+d > 1 {
			row.Duplicates += a + d - 1
		}
		switch {
		case trialMix(id) == "dead" && d == 0:
			row.Lost++
			t.Errorf("%s: message %d never reached the dead letter", kind, id)
		case trialMix(id) != "dead" && a == 0 && d == 0:
			row.Lost++
			t.Errorf("%s: message %d lost (never acknowledged, not in the dead letter)", kind, id)
		case trialMix(id) != "dead" && a == 0 && d > 0:
			row.DeadByRestarts++ // its deliveries returned by the restarts spent its attempts
		case trialMix(id) == "dead" && l.runs[queue][id] < trialCap:
			row.EarlyDead++
		}
	}
	return row
}

func (r trialRow) String() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d |", r.Kind, r.Messages, r.Acked, r.DeadLetters, r.WithCount, r.Duplicates, r.DeadByRestarts, r.EarlyDead, r.Lost)
}

const trialHeader = "| queue | messages | acknowledged | dead letters | with count | duplicates | dead by restarts | dead before cap runs | lost |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
