package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/settlehq/settle/chaos/internal/servers"
	"github.com/settlehq/settle/core/inbox"
	"github.com/settlehq/settle/dialect-sqlite"
)

// The suite's port ranges (chaos/internal/trial): the trial's own servers, never the shared ones.
var (
	rabbitPorts = [2]int{5680, 5689}
	rabbitDist  = 25680
	natsPorts   = [2]int{4230, 4239}
)

// drainBound bounds a trial's drain after seeding.
const drainBound = 5 * time.Minute

type driver struct {
	dir, self           string
	messages, killEvery int
	start               time.Time
	groups              *servers.Groups
	rabbit              *servers.RabbitMQ
	nats                *servers.NATS
}

func (d *driver) close() {
	if d.rabbit != nil {
		d.rabbit.Close()
		d.rabbit = nil
	}
	if d.nats != nil {
		d.nats.Close()
		d.nats = nil
	}
	if d.groups != nil {
		d.groups.KillAll()
	}
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// server starts the backend's server on first use and returns its URL.
func (d *driver) server(ctx context.Context, backend string) (string, error) {
	if d.groups == nil {
		d.groups = servers.NewGroups(filepath.Join(d.dir, "groups"))
	}
	switch backend {
	case "classic", "quorum":
		if d.rabbit == nil {
			port, err := servers.FreePort(rabbitPorts[0], rabbitPorts[1])
			if err != nil {
				return "", err
			}
			node := fmt.Sprintf("settle-chaos-inbox-%d-%d@localhost", port, os.Getpid())
			if d.rabbit, err = servers.StartRabbitMQ(ctx, d.groups, filepath.Join(d.dir, "rabbitmq"), node, port, rabbitDist+port-rabbitPorts[0]); err != nil {
				return "", err
			}
			d.logf("rabbitmq: own node %s on 127.0.0.1:%d", node, port)
		}
		return d.rabbit.URL(), nil
	case "nats":
		if d.nats == nil {
			bin, version, err := servers.BuildNATSServer(ctx, filepath.Join(d.dir, "nats-bin"))
			if err != nil {
				return "", err
			}
			port, err := servers.FreePort(natsPorts[0], natsPorts[1])
			if err != nil {
				return "", err
			}
			if d.nats, err = servers.StartNATS(ctx, d.groups, bin, filepath.Join(d.dir, "nats"), port); err != nil {
				return "", err
			}
			d.logf("nats: own nats-server %s on 127.0.0.1:%d", version, port)
		}
		return d.nats.URL(), nil
	}
	return "", fmt.Errorf("unknown backend %q (classic, quorum, nats)", backend)
}

// result is one trial's row.
type result struct {
	name                             string
	messages, selfKills, driverKills int
	rows, once, lost, twice          int
	duplicates                       int64
	took                             time.Duration
	err                              error
}

// ok: every id once, none lost, and every message a worker killed itself on (committed, not
// acknowledged) came back and was acknowledged as a duplicate.
func (r result) ok() bool {
	return r.err == nil && r.lost == 0 && r.twice == 0 && r.once == r.messages && r.duplicates >= int64(r.selfKills)
}

func (r result) row() string {
	status := "PASS"
	if !r.ok() {
		status = "FAIL"
		if r.err != nil {
			status += ": " + r.err.Error()
		}
	}
	return fmt.Sprintf("| inbox/%s | %d | %d (%d, %d) | %d | %d | %d | %d | %d | %v | %s |", r.name, r.messages,
		r.selfKills+r.driverKills, r.selfKills, r.driverKills, r.rows, r.once, r.lost, r.twice, r.duplicates, r.took.Round(100*time.Millisecond), status)
}

// trial runs one backend's trial in dir.
func (d *driver) trial(backend, dir string) (res result) {
	res = result{name: backend, messages: d.messages}
	started := time.Now()
	defer func() { res.took = time.Since(started) }()
	ctx, cancel := context.WithTimeout(context.Background(), drainBound+2*time.Minute)
	defer cancel()
	url, err := d.server(ctx, backend)
	if err != nil {
		res.err = err
		return res
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.err = err
		return res
	}
	dbPath := filepath.Join(dir, "service.db")
	if res.err = createTables(ctx, dbPath); res.err != nil {
		return res
	}
	t := &trialRun{d: d, backend: backend, url: url, dir: dir, db: dbPath,
		queue: fmt.Sprintf("chaos_inbox_%s_%d", backend, os.Getpid())}
	defer t.cleanup()
	if res.err = t.startWorker(); res.err != nil {
		return res
	}
	if res.err = t.seed(ctx, d.messages); res.err != nil {
		return res
	}
	res.err = t.drain(ctx)
	res.selfKills, res.driverKills, res.duplicates = t.selfKills, t.driverKills, t.duplicates
	res.rows, res.once, res.lost, res.twice, err = check(ctx, dbPath, d.messages)
	if res.err == nil {
		res.err = err
	}
	return res
}

func createTables(ctx context.Context, path string) error {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	ddl, err := inbox.DDL(db.Dialect(), "inbox")
	if err != nil {
		return err
	}
	for _, s := range []string{ddl, "CREATE TABLE side (id TEXT NOT NULL)"} {
		if _, err := db.Pool().ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func msgID(i int) string { return fmt.Sprintf("m-%05d", i) }

// check reads the side table: rows, ids present once, ids missing, ids present more than once.
func check(ctx context.Context, path string, n int) (rows, once, lost, twice int, err error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return 0, 0, n, 0, err
	}
	defer db.Close()
	r, err := db.Pool().QueryContext(ctx, "SELECT id, COUNT(*) FROM side GROUP BY id")
	if err != nil {
		return 0, 0, n, 0, err
	}
	defer r.Close()
	seen := map[string]int{}
	for r.Next() {
		var id string
		var c int
		if err := r.Scan(&id, &c); err != nil {
			return 0, 0, n, 0, err
		}
		seen[id] = c
		rows += c
	}
	for i := range n {
		switch c := seen[msgID(i)]; {
		case c == 0:
			lost++
		case c == 1:
			once++
		default:
			twice++
		}
	}
	if err := r.Err(); err != nil {
		return rows, once, lost, twice, err
	}
	if len(seen) != once+twice {
		return rows, once, lost, twice, fmt.Errorf("the side table holds %d ids that were never published", len(seen)-once-twice)
	}
	return rows, once, lost, twice, nil
}

// trialRun is one trial's worker, queue and counts.
type trialRun struct {
	d                      *driver
	backend, url, dir, db  string
	queue                  string
	worker                 *servers.Proc
	gen                    uint64
	selfKills, driverKills int
	duplicates             int64
}

func (t *trialRun) startWorker() error {
	t.gen++
	log := filepath.Join(t.dir, "worker-"+strconv.FormatUint(t.gen, 10)+".log")
	cmd := exec.Command(t.d.self, "-worker", "-backend", t.backend, "-url", t.url, "-queue", t.queue, "-db", t.db,
		"-kill-every", strconv.Itoa(t.d.killEvery), "-generation", strconv.FormatUint(t.gen, 10))
	p, err := servers.Start(t.d.groups, "chaos-inbox-worker", cmd, log, syscall.SIGKILL)
	if err != nil {
		return err
	}
	t.worker = p
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "ready\n") {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("worker %d exited before it was ready: %s", t.gen, p.Tail(5))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("worker %d not ready after a minute: %s", t.gen, p.Tail(5))
}

var statsLine = regexp.MustCompile(`stats recorded=(\d+) duplicates=(\d+)`)

// ended counts a worker's end: killed by itself (SIGKILL not sent by the driver) or stopped.
func (t *trialRun) ended(byDriver bool) {
	<-t.worker.Done()
	b, _ := os.ReadFile(t.worker.Log)
	t.duplicates += int64(strings.Count(string(b), "\nduplicate ")) + int64(boolInt(strings.HasPrefix(string(b), "duplicate ")))
	if byDriver || statsLine.Match(b) {
		return
	}
	if err := t.worker.Err(); err != nil && strings.Contains(err.Error(), "killed") {
		t.selfKills++
		return
	}
	t.logf("worker %d ended by itself: %v: %s", t.gen, t.worker.Err(), t.worker.Tail(3))
}

// drain restarts the worker whenever it dies, SIGKILLs it at random moments while the side
// table fills, and then stops it and starts it again until the queue holds nothing.
func (t *trialRun) drain(ctx context.Context) error {
	deadline := time.Now().Add(drainBound)
	nextKill := time.Now().Add(randDelay())
	for time.Now().Before(deadline) {
		select {
		case <-t.worker.Done():
			t.ended(false)
			if err := t.startWorker(); err != nil {
				return err
			}
			continue
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(nextKill) {
			t.driverKills++
			t.worker.KillGroup()
			t.ended(true)
			if err := t.startWorker(); err != nil {
				return err
			}
			nextKill = time.Now().Add(randDelay())
			continue
		}
		_, once, lost, twice, _ := check(ctx, t.db, t.d.messages)
		if twice > 0 || lost == 0 {
			t.logf("side table complete (%d once, %d twice); draining", once, twice)
			return t.settleRest(ctx, deadline)
		}
	}
	return fmt.Errorf("not drained within %v", drainBound)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *trialRun) logf(format string, args ...any) { t.d.logf(t.backend+": "+format, args...) }

func randDelay() time.Duration { return time.Duration(500+rand.IntN(2500)) * time.Millisecond }

// settleRest stops the worker (its unacknowledged messages return to the queue) and, while the
// queue holds messages, runs it again until they are acknowledged as duplicates.
func (t *trialRun) settleRest(ctx context.Context, deadline time.Time) error {
	for time.Now().Before(deadline) {
		_ = t.worker.Signal(syscall.SIGTERM)
		select {
		case <-t.worker.Done():
			t.ended(true)
		case <-time.After(30 * time.Second):
			t.worker.KillGroup()
			t.ended(true)
		}
		left, err := t.remaining(ctx)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		t.logf("%d messages left in the queue; running the worker again", left)
		if err := t.startWorker(); err != nil {
			return err
		}
		for time.Now().Before(deadline) {
			if t.worker.Exited() {
				t.ended(false)
				if err := t.startWorker(); err != nil {
					return err
				}
			}
			if n, err := t.remaining(ctx); err == nil && n == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return fmt.Errorf("messages still in the queue after %v", drainBound)
}
