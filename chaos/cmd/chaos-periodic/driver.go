package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/settlehq/settle/chaos/internal/servers"
	"github.com/settlehq/settle/core/periodic"
	"github.com/settlehq/settle/dialect-sqlite"
)

// natsPorts is the suite's NATS port range (chaos/internal/trial): its own server only.
var natsPorts = [2]int{4230, 4239}

type driver struct {
	dir, self string
	seconds   int
	groups    *servers.Groups
	nats      *servers.NATS
}

func (d *driver) close() {
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

type result struct {
	name                                     string
	seconds, published, twice, missed, kills int
	gap                                      time.Duration
	err                                      error
}

func (r result) ok() bool {
	return r.err == nil && r.twice == 0 && r.gap <= 2*time.Second && r.published > 0
}

func (r result) row() string {
	status := "PASS"
	if !r.ok() {
		status = "FAIL"
		if r.err != nil {
			status += ": " + r.err.Error()
		}
	}
	return fmt.Sprintf("| periodic/%s | %d | %d | %d | %d | %v | %d | %s |", r.name, r.seconds, r.published, r.twice, r.missed, r.gap, r.kills, status)
}

// proc is one worker process of a trial.
type proc struct {
	p    *servers.Proc
	args []string
	log  string
	n    int
}

func (d *driver) trial(backend string) (res result) {
	res = result{name: backend, seconds: d.seconds}
	dir := filepath.Join(d.dir, backend)
	if res.err = os.MkdirAll(dir, 0o755); res.err != nil {
		return res
	}
	if d.groups == nil {
		d.groups = servers.NewGroups(filepath.Join(d.dir, "groups"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(d.seconds)*time.Second+2*time.Minute)
	defer cancel()
	ledger := filepath.Join(dir, "ledger")
	args := []string{"-worker", "-backend", backend, "-ledger", ledger}
	switch backend {
	case "sqlite":
		db := filepath.Join(dir, "claims.db")
		if res.err = createTicks(ctx, db); res.err != nil {
			return res
		}
		args = append(args, "-db", db)
	case "nats":
		url, err := d.natsServer(ctx)
		if err != nil {
			res.err = err
			return res
		}
		args = append(args, "-url", url, "-bucket", fmt.Sprintf("chaos_periodic_%d", os.Getpid()))
	default:
		res.err = fmt.Errorf("unknown backend %q (sqlite, nats)", backend)
		return res
	}
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = &proc{args: args, log: filepath.Join(dir, fmt.Sprintf("worker-%d.log", i))}
		if res.err = d.start(procs[i]); res.err != nil {
			return res
		}
	}
	defer func() {
		for _, p := range procs {
			if p.p != nil && !p.p.Exited() {
				p.p.KillGroup()
			}
		}
	}()
	began := time.Now()
	end := began.Add(time.Duration(d.seconds) * time.Second)
	for k := 1; k <= 2; k++ {
		time.Sleep(time.Until(began.Add(time.Duration(d.seconds) * time.Second * time.Duration(k) / 3)))
		victim := leader(procs, ledger)
		d.logf("%s: SIGKILL of the process that published the latest tick (pid %d)", backend, victim.p.Pid())
		victim.p.KillGroup()
		<-victim.p.Done()
		res.kills++
		time.Sleep(2 * time.Second)
		if res.err = d.start(victim); res.err != nil {
			return res
		}
	}
	time.Sleep(time.Until(end))
	for _, p := range procs {
		_ = p.p.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if !p.p.Wait(30 * time.Second) {
			p.p.KillGroup()
		}
	}
	res.published, res.twice, res.missed, res.gap, res.err = readLedger(ledger)
	return res
}

func (d *driver) start(p *proc) error {
	p.n++
	cmd := exec.Command(d.self, p.args...)
	sp, err := servers.Start(d.groups, "chaos-periodic-worker", cmd, p.log, syscall.SIGKILL)
	if err != nil {
		return err
	}
	p.p = sp
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(p.log); strings.Count(string(b), "ready\n") >= p.n {
			return nil
		}
		if sp.Exited() {
			return fmt.Errorf("worker exited before it was ready: %s", sp.Tail(5))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("worker not ready after 30 s: %s", sp.Tail(5))
}

// leader is the process that published the latest tick in the ledger (the first one if none).
func leader(procs []*proc, ledger string) *proc {
	b, _ := os.ReadFile(ledger)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		if _, pid, ok := strings.Cut(last, " "); ok {
			for _, p := range procs {
				if strconv.Itoa(p.p.Pid()) == pid {
					return p
				}
			}
		}
	}
	return procs[0]
}

func createTicks(ctx context.Context, path string) error {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	ddl, err := periodic.DDL(db.Dialect(), "ticks")
	if err != nil {
		return err
	}
	_, err = db.Pool().ExecContext(ctx, ddl)
	return err
}

func (d *driver) natsServer(ctx context.Context) (string, error) {
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

// readLedger reads the published ticks: how many, how many twice, how many missing between the
// first and the last, and the longest gap between two published ticks.
func readLedger(path string) (published, twice, missed int, gap time.Duration, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer f.Close()
	count := map[time.Time]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, _, _ := strings.Cut(sc.Text(), " ")
		_, at, ok := strings.Cut(id, "@")
		t, perr := time.Parse(time.RFC3339, at)
		if !ok || perr != nil {
			return 0, 0, 0, 0, fmt.Errorf("ledger line %q: not a tick's message id", sc.Text())
		}
		count[t]++
	}
	ticks := make([]time.Time, 0, len(count))
	for t, n := range count {
		ticks = append(ticks, t)
		if n > 1 {
			twice++
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	for i := 1; i < len(ticks); i++ {
		g := ticks[i].Sub(ticks[i-1])
		gap = max(gap, g)
		missed += int(g/time.Second) - 1
	}
	return len(ticks), twice, missed, gap, sc.Err()
}
