package trial

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
)

// The driver's own violation categories, beside the checker's.
const (
	// ErrorCat: the trial could not run as designed (a worker that never started, a server
	// that did not come back, a fault that could not be injected).
	ErrorCat chaos.Category = "error"
	// Orphan: a plugin process outlived its killed host.
	Orphan chaos.Category = "orphan"
	// Refused: a second process opened a form that must refuse it (SQLite advisory keys).
	Refused chaos.Category = "refused"
)

// Profile sizes the trials.
type Profile struct {
	Name string
	// Messages per kill loop, Small per other trial (unless the trial sets its own, which
	// Scale multiplies); Kills faults per kill loop, Faults per other trial.
	Messages, Small, Kills, Faults, Scale int
	// Drain bounds a trial's drain (unless the trial sets its own, which Scale multiplies).
	Drain time.Duration
	// Lease is the SQL lease form's lease.
	Lease time.Duration
	// Crash makes the broker-restart trials kill the RabbitMQ node (a full restart, ~10 s)
	// instead of restarting its application.
	Crash bool
	// Gap bounds the random wait between faults (a fault also comes when a random share of
	// the messages has finished, if that is sooner).
	Gap [2]time.Duration
}

var (
	// Bounded is the CI profile: every trial, few messages, a few faults each.
	Bounded = Profile{Name: "bounded", Messages: 40, Small: 30, Kills: 3, Faults: 2, Scale: 1, Drain: 40 * time.Second, Lease: time.Second,
		Gap: [2]time.Duration{100 * time.Millisecond, 1500 * time.Millisecond}}
	// Long is the full profile: 2,000 messages and 100+ kills per backend × form.
	Long = Profile{Name: "long", Messages: 2000, Small: 300, Kills: 120, Faults: 12, Scale: 5, Drain: 25 * time.Minute, Lease: 2 * time.Second, Crash: true,
		Gap: [2]time.Duration{20 * time.Millisecond, 400 * time.Millisecond}}
)

// Fault is something the driver does to a trial.
type Fault string

// The faults.
const (
	Kill            Fault = "kill"             // SIGKILL a worker, start it again
	Pause           Fault = "pause"            // SIGSTOP a worker past its lease, then SIGCONT
	Terminate       Fault = "terminate"        // end the workers' server connections
	RestartGraceful Fault = "restart-graceful" // fast shutdown (PostgreSQL), SIGTERM (MariaDB), app restart (RabbitMQ)
	RestartCrash    Fault = "restart-crash"    // immediate shutdown (PostgreSQL), SIGKILL (MariaDB, RabbitMQ node)
	Cut             Fault = "cut"              // reset every AMQP connection at the suite's TCP proxy
	LockRow         Fault = "lock-row"         // hold SELECT … FOR UPDATE on a claimed row
	DeleteDead      Fault = "delete-dead"      // delete the dead-letter queue, declare it again later
)

// Mark says a trial is expected to fail today, in which checks, because of which open issue.
type Mark struct {
	Issue  int
	Reason string
	Cats   []chaos.Category
	// Intermittent says the defect shows only when a fault lands at the wrong moment: a pass
	// then proves nothing and shows as PASS (with the mark in its note), not XPASS.
	Intermittent bool
}

// Scenario is what a trial does.
type Scenario struct {
	// Messages: -1 the profile's Messages (kill loops), 0 its Small, n n×Scale.
	Messages int
	// Drain bounds the drain (×Scale; 0: the profile's Drain).
	Drain         time.Duration
	Mix           string
	Transactional bool
	// Workers is the number of worker processes (default 1), Handlers their -workers.
	Workers, Handlers int
	// Faults are injected in turn, FaultCount of them (0: the profile's Faults; -1: its Kills).
	Faults     []Fault
	FaultCount int
	// Work is the mean handler time (default 10ms).
	Work        time.Duration
	WorkerFlags []string
	// SecondSpelling: the second worker names the queue table schema-qualified.
	SecondSpelling bool
	// RefuseSecond: the second worker must be refused at start.
	RefuseSecond bool
	// Plugin loads the eventplugin binary for the ack; kills then check for orphan plugins.
	Plugin bool
	// Bounds for the checker (0: unchecked).
	StallBound, RecoverBound time.Duration
	MaxRuns                  int
	// PauseFor and LockFor are how long Pause and LockRow last (defaults 2.5 leases, 6 s).
	PauseFor, LockFor time.Duration
	// KillNode makes RestartCrash kill the RabbitMQ node (kill -9) in every profile; without it
	// the bounded profile restarts the node's application instead.
	KillNode bool
}

// Trial is one trial: a scenario on a backend and form.
type Trial struct {
	Name, Backend, Form string
	Scenario            Scenario
	// Mark, when set, says the trial is expected to fail today.
	Mark *Mark
	// open returns the trial's backend.
	open func(env *Env) backend
}

// Key names the trial as name/backend/form.
func (t *Trial) Key() string { return t.Name + "/" + t.Backend + "/" + t.Form }

// backend is what the driver does to one kind of queue.
type backend interface {
	name() string
	prepare(ctx context.Context, r *run) error
	workerArgs(r *run) []string
	seed(ctx context.Context, ids []string) error
	// pending counts messages not finished; exact is false where messages in flight or held
	// by a worker are not counted (RabbitMQ).
	pending(ctx context.Context) (n int, exact bool, err error)
	snapshot(ctx context.Context) (chaos.Snapshot, error)
	terminate(ctx context.Context) (int, error)
	restart(ctx context.Context, mode servers.StopMode) error
	lockRow(ctx context.Context, row int64, d time.Duration) error
	cleanup(ctx context.Context)
	strictAttempts() bool
	sideRows() bool
}

// run is one trial being run.
type run struct {
	env    *Env
	tr     *Trial
	sc     Scenario
	id     string
	dir    string
	ledger *chaos.Ledger
	st     *state
	b      backend
	mix    chaos.Mix
	ids    []string
	seed   int64

	mu            sync.Mutex
	workers       []*worker
	refusedWorker *worker
	driverV       []chaos.Violation
	started       time.Time
}

// fail records a violation found by the driver.
func (r *run) fail(c chaos.Category, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.driverV = append(r.driverV, chaos.Violation{Cat: c, Detail: fmt.Sprintf(format, args...)})
}

// retryDelay is the delay of the retry_after kind's RetryAfter in every worker.
const retryDelay = 300 * time.Millisecond

// inProcessDelay is how long a retry_after copy waits in the worker process that settled its
// original: retryDelay where the backend keeps such copies in the process (RabbitMQ without a
// delay backend), 0 where the server keeps them.
func inProcessDelay(b backend) time.Duration {
	if ab, ok := b.(*amqpBackend); ok && ab.delay == "inprocess" {
		return retryDelay
	}
	return 0
}

// chargePerCrash (chaos.Expect.ChargePerCrash): the SQL forms take a message a crash charged
// while it waited in a claim again alone and count it as its handler starts, so only a crash
// between that count and the handler charges it again; a quorum queue charges every message
// in a dying consumer's window, and a message one consumer's crash returned may wait in
// another's open window when that one dies too: each crash charges a message at most once,
// as transport-amqp documents. A classic queue counts nothing at delivery. A JetStream
// subscription alone on its consumer holds a suspect message alone, so one charge without a
// handler stays the limit; with several worker processes on one consumer, one's crash returns
// its messages into another's open pull request, which holds a whole batch of them when it is
// busy with a backlog: each crash at most once, as transport-nats documents.
func chargePerCrash(b backend, workers int) bool {
	switch b := b.(type) {
	case *sqlBackend:
		return true
	case *amqpBackend:
		return b.queueType == "quorum"
	case *natsBackend:
		return workers > 1
	}
	return false
}

// copyOutcomes names the outcomes backend b settles by publishing a copy, then acknowledging
// the original (chaos.Expect.CopyOutcomes): on RabbitMQ dead letters, retry_after where the
// server holds the delay (an in-process delay acknowledges the original at once and publishes
// later), and a classic queue's counted retries (the trials always set a cap); on NATS dead
// letters (a retry_after is a NAK with a delay). SQL backends settle in place.
func copyOutcomes(b backend) map[string]bool {
	switch b := b.(type) {
	case *amqpBackend:
		out := map[string]bool{"dead_letter": true}
		if b.delay != "inprocess" {
			out["retry_after"] = true
		}
		if b.queueType != "quorum" {
			out["retry"] = true
		}
		return out
	case *natsBackend:
		return map[string]bool{"dead_letter": true}
	}
	return nil
}

func (r *run) workerArgs(name string) []string {
	args := append(r.b.workerArgs(r),
		"-ledger", filepath.Join(r.dir, "ledger"), "-name", name, "-seed", strconv.FormatInt(r.seed, 10),
		"-mix", r.mix.String(), "-cap", "3", "-workers", strconv.Itoa(r.sc.Handlers),
		"-state", r.dir, "-work", r.sc.Work.String(), "-lease", r.env.Profile.Lease.String(),
		"-retry-delay", retryDelay.String())
	if r.sc.Transactional {
		args = append(args, "-transactional")
	}
	if r.sc.Plugin {
		args = append(args, "-plugin", r.env.PluginBin, "-plugin-args", "-audit-table a_"+r.id)
	}
	return args
}

// Run runs the trials, a lane per backend (the lanes at once, each lane's trials one after
// another, since some restart their lane's server), and returns one row per trial in order.
func Run(ctx context.Context, env *Env, trials []*Trial) []chaos.Row {
	rows := make([]chaos.Row, len(trials))
	lanes := make(map[string][]int)
	var order []string
	for i, t := range trials {
		if _, ok := lanes[t.Backend]; !ok {
			order = append(order, t.Backend)
		}
		lanes[t.Backend] = append(lanes[t.Backend], i)
	}
	var wg sync.WaitGroup
	for _, lane := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range lanes[lane] {
				if ctx.Err() != nil {
					rows[i] = chaos.Row{Trial: trials[i].Name, Backend: trials[i].Backend, Form: trials[i].Form, Status: chaos.StatusFail, Note: "not run: " + ctx.Err().Error()}
					continue
				}
				rows[i] = runTrial(ctx, env, trials[i])
				env.logf("%-5s %s (%v) %s", rows[i].Status, trials[i].Key(), rows[i].Duration.Round(10*time.Millisecond), rows[i].Note)
			}
		}()
	}
	wg.Wait()
	return rows
}

func runTrial(ctx context.Context, env *Env, tr *Trial) chaos.Row {
	start := time.Now()
	r := &run{env: env, tr: tr, sc: tr.Scenario, id: env.nextID(), seed: time.Now().UnixNano() % 1e9, started: start}
	row := chaos.Row{Trial: tr.Name, Backend: tr.Backend, Form: tr.Form}
	res, err := r.execute(ctx)
	if res == nil {
		res = &chaos.Result{Counts: map[chaos.Category]int{}}
	}
	if err != nil {
		res.Add(ErrorCat, "", "%v", err)
	}
	for _, v := range r.driverV {
		res.Add(v.Cat, v.ID, "%s", v.Detail)
	}
	row.Result, row.Duration = res, time.Since(start)
	row.Status, row.Note = verdict(res, tr.Mark)
	return row
}

// verdict turns a result and a trial's mark into its status.
func verdict(res *chaos.Result, m *Mark) (chaos.Status, string) {
	failed := res.Failed()
	if len(failed) == 0 {
		if m != nil && m.Intermittent {
			return chaos.StatusPass, fmt.Sprintf("(marked intermittent, issue %d: did not show this run)", m.Issue)
		}
		if m != nil {
			return chaos.StatusXPass, fmt.Sprintf("marked expected-to-fail (issue %d: %s) but every check held: the defect looks fixed, remove the mark", m.Issue, m.Reason)
		}
		return chaos.StatusPass, ""
	}
	names := make([]string, len(failed))
	for i, c := range failed {
		names[i] = fmt.Sprintf("%s×%d", c, res.Counts[c])
	}
	if m == nil {
		return chaos.StatusFail, "failed: " + strings.Join(names, ", ")
	}
	var unexpected []string
	for _, c := range failed {
		if !slices.Contains(m.Cats, c) {
			unexpected = append(unexpected, string(c))
		}
	}
	if len(unexpected) > 0 {
		return chaos.StatusFail, fmt.Sprintf("failed: %s — %s is not what the mark expects (issue %d: %s)",
			strings.Join(names, ", "), strings.Join(unexpected, ", "), m.Issue, m.Reason)
	}
	return chaos.StatusXFail, fmt.Sprintf("issue %d: %s (%s)", m.Issue, m.Reason, strings.Join(names, ", "))
}

func (r *run) execute(ctx context.Context) (*chaos.Result, error) {
	p := r.env.Profile
	switch {
	case r.sc.Messages < 0:
		r.sc.Messages = p.Messages
	case r.sc.Messages == 0:
		r.sc.Messages = p.Small
	default:
		r.sc.Messages *= p.Scale
	}
	drain := p.Drain
	if r.sc.Drain > 0 {
		drain = r.sc.Drain * time.Duration(p.Scale)
	}
	if r.sc.Workers == 0 {
		r.sc.Workers = 1
	}
	if r.sc.Handlers == 0 {
		r.sc.Handlers = 4
	}
	if r.sc.Work == 0 {
		r.sc.Work = 10 * time.Millisecond
	}
	if r.sc.Mix == "" {
		r.sc.Mix = chaos.DefaultMix
	}
	if r.sc.Plugin && r.env.PluginBin == "" {
		return nil, fmt.Errorf("the plugin trial needs an eventplugin binary (-plugin)")
	}
	mix, err := chaos.ParseMix(r.sc.Mix, r.seed)
	if err != nil {
		return nil, err
	}
	if !r.sc.Transactional {
		mix = mix.Without(chaos.Kind.NeedsTransaction)
	}
	r.mix = mix
	r.ids = chaos.MessageIDs(r.sc.Messages)
	// Each poison message crashes its worker at every one of the cap's attempts, alone, and the
	// driver restarts a worker that keeps dying after a backoff of up to a second: the drain a
	// run needs grows with how many poison messages its seed drew (1 to 7 of 20), which a fixed
	// bound did not (a seed with 7 ran out of a 12 s drain under load).
	if n := mix.Counts(r.ids)[chaos.Poison]; n > 0 {
		drain = max(drain, 5*time.Second+time.Duration(3*n)*1500*time.Millisecond*time.Duration(p.Scale))
	}
	r.dir = filepath.Join(r.env.Dir, "trial-"+r.id+"-"+strings.ReplaceAll(r.tr.Key(), "/", "-"))
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	ledgerPath := filepath.Join(r.dir, "ledger")
	if r.ledger, err = chaos.OpenLedger(ledgerPath, "driver"); err != nil {
		return nil, err
	}
	defer r.ledger.Close()
	r.st = newState(ledgerPath)
	r.b = r.tr.open(r.env)
	if err := r.b.prepare(ctx, r); err != nil {
		return nil, err
	}
	defer r.b.cleanup(context.WithoutCancel(ctx))

	stopFollow := make(chan struct{})
	go r.st.follow(stopFollow)
	defer close(stopFollow)
	defer r.stopWorkers()

	if err := r.startWorkers(); err != nil {
		return nil, err
	}
	if err := r.b.seed(ctx, r.ids); err != nil {
		return nil, err
	}
	_ = r.ledger.Write(chaos.Entry{Ev: chaos.EvSeeded, Detail: fmt.Sprintf("%d messages, mix %s", len(r.ids), r.mix)})

	stopSup := make(chan struct{})
	supDone := make(chan struct{})
	go func() { defer close(supDone); r.supervise(stopSup, 1000+10*r.faultCount()) }()
	deadline := time.Now().Add(drain)
	r.inject(ctx, deadline)
	drained := r.waitDrained(ctx, deadline)
	var notes []string
	if rp, ok := r.b.(repairer); ok && drained {
		// What the workers cannot reach, the driver repairs as an operator would, then drains again.
		note, err := rp.repairStranded(ctx, r)
		if err != nil {
			return nil, err
		}
		if note != "" {
			notes = append(notes, note)
			drained = r.waitDrained(ctx, deadline)
		}
	}
	if drained {
		_ = r.ledger.Write(chaos.Entry{Ev: chaos.EvDrained})
	} else {
		_ = r.ledger.Write(chaos.Entry{Ev: chaos.EvGaveUp, Detail: fmt.Sprintf("not drained within %v", drain)})
	}
	close(stopSup)
	<-supDone
	r.stopWorkers()
	if r.sc.Plugin {
		r.checkOrphans("after the workers stopped")
	}

	snap, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.st.poll()
	entries, torn, err := chaos.ReadLedgerFile(ledgerPath)
	if err != nil {
		return nil, err
	}
	res := chaos.Check(entries, snap, chaos.Expect{
		IDs: r.ids, Mix: r.mix, Cap: 3, SideRows: r.b.sideRows() && r.sc.Transactional,
		StrictAttempts: r.b.strictAttempts(), StallBound: r.sc.StallBound, RecoverBound: r.sc.RecoverBound, MaxRuns: r.sc.MaxRuns,
		InProcessDelay: inProcessDelay(r.b), CopyOutcomes: copyOutcomes(r.b), ChargePerCrash: chargePerCrash(r.b, r.sc.Workers),
		HandledToCap: handledToCap(r.b),
	})
	res.Torn = torn
	res.Notes = append(res.Notes, notes...)
	return res, nil
}

// repairer is a backend that can hold messages no worker will ever get (NATS stranded
// messages): after the drain the driver repairs them as an operator would, and reports it.
type repairer interface {
	repairStranded(ctx context.Context, r *run) (note string, err error)
}

// snapshot reads the backend, retrying for a while (a server may still be coming back).
func (r *run) snapshot(ctx context.Context) (chaos.Snapshot, error) {
	var err error
	for i := 0; i < 20; i++ {
		var snap chaos.Snapshot
		if snap, err = r.b.snapshot(ctx); err == nil {
			return snap, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return chaos.Snapshot{}, fmt.Errorf("reading the backend at the end: %w", err)
}

func (r *run) startWorkers() error {
	for i := 1; i <= r.sc.Workers; i++ {
		var extra []string
		if i == 2 && r.sc.SecondSpelling {
			if sb, ok := r.b.(*sqlBackend); ok {
				extra = []string{"-table", sb.qualified()}
			}
		}
		w, err := r.startWorker("w"+strconv.Itoa(i), extra...)
		if err != nil {
			return err
		}
		if i == 2 && r.sc.RefuseSecond {
			r.expectRefused(w)
			continue
		}
		if err := w.waitReady(30 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// expectRefused checks that w fails to start (and keeps it from being restarted).
func (r *run) expectRefused(w *worker) {
	r.mu.Lock()
	r.refusedWorker = w
	r.mu.Unlock()
	err := w.waitReady(15 * time.Second)
	if err == nil {
		r.fail(Refused, "a second process opened the same SQLite file in the advisory form and started: its in-process keys cannot serialise it with the first")
	}
}

func (r *run) stopWorkers() {
	r.mu.Lock()
	ws := append([]*worker(nil), r.workers...)
	r.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		done := w.finished && (w.proc == nil || w.proc.Exited())
		w.mu.Unlock()
		if done {
			continue
		}
		if !w.terminate(10 * time.Second) {
			r.fail(ErrorCat, "worker %s did not stop within 10s of SIGTERM", w.name)
		}
	}
}

func (r *run) faultCount() int {
	switch {
	case len(r.sc.Faults) == 0:
		return 0
	case r.sc.FaultCount > 0:
		return r.sc.FaultCount
	case r.sc.FaultCount < 0:
		return r.env.Profile.Kills
	}
	return r.env.Profile.Faults
}

// inject performs the trial's faults at random moments of the drain: each when a random share
// (5–80%) of the messages has finished or after a random gap (the profile's), whichever first
// (grouped settlement can finish a whole batch at once), until the faults are done or the
// queue is drained.
func (r *run) inject(ctx context.Context, deadline time.Time) {
	n := r.faultCount()
	if n == 0 {
		return
	}
	points := make([]int, n)
	for i := range points {
		points[i] = len(r.ids)/20 + rand.IntN(max(1, len(r.ids)*75/100))
	}
	sort.Ints(points)
	// A fault that finds nothing to act on (the worker is restarting after a self kill) does
	// not count: the loop tries again, up to three times the faults asked for.
	done := 0
	for try := 0; done < n && try < 3*n && ctx.Err() == nil && time.Now().Before(deadline); try++ {
		g := r.env.Profile.Gap
		since, gap := time.Now(), g[0]+time.Duration(rand.Int64N(int64(g[1]-g[0])+1))
		for r.st.finishedCount() < points[done] && time.Since(since) < gap && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if r.isDrained(ctx) {
			return
		}
		if r.fault(ctx, r.sc.Faults[done%len(r.sc.Faults)]) {
			done++
		}
	}
}

// waitDrained waits until every message has finished, or until deadline.
func (r *run) waitDrained(ctx context.Context, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if r.isDrained(ctx) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (r *run) isDrained(ctx context.Context) bool {
	r.st.poll()
	n, exact, err := r.b.pending(ctx)
	if err != nil || n > 0 {
		return false
	}
	if exact {
		return true
	}
	// RabbitMQ: messages in flight or held in a worker's process are not counted, so the
	// ledger must agree — or nothing may have happened for a while and every message it does
	// not show finished must have asked for an ack or a drop (its line died with its process).
	// A broker that moves messages to the dead letter by itself (a quorum queue at its delivery
	// limit) leaves no ledger line: then the dead-letter queue's count completes the ledger's.
	if r.st.finishedCount() >= len(r.ids) {
		return true
	}
	if r.st.quietFor() <= 3*time.Second {
		return false
	}
	if r.st.onlyUnlogged(r.ids) || r.st.quietFor() > 20*time.Second {
		// Nothing in the broker, nothing happening for 20 s: what is missing now is lost, and
		// waiting longer would only wait out the bound.
		return true
	}
	dc, ok := r.b.(interface {
		deadCount(context.Context) (int, error)
	})
	if !ok {
		return false
	}
	dead, err := dc.deadCount(ctx)
	return err == nil && r.st.ackedOrDropped()+dead >= len(r.ids)
}

// liveWorker picks a random worker that is running.
func (r *run) liveWorker() *worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	var live []*worker
	for _, w := range r.workers {
		w.mu.Lock()
		ok := !w.finished && w != r.refusedWorker && !w.proc.Exited()
		w.mu.Unlock()
		if ok {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rand.IntN(len(live))]
}

// waitLiveWorker waits up to 3 s for a running worker (one may be restarting).
func (r *run) waitLiveWorker() *worker {
	for t := time.Now(); time.Since(t) < 3*time.Second; time.Sleep(20 * time.Millisecond) {
		if w := r.liveWorker(); w != nil {
			return w
		}
	}
	return nil
}

func (r *run) liveWorkers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.workers {
		if w != r.refusedWorker {
			n++
		}
	}
	return n
}

// fault performs one fault and records it in the ledger; false when there was nothing to act
// on (no worker running, no delivery in flight).
func (r *run) fault(ctx context.Context, f Fault) bool {
	mark := func(e chaos.Entry) { e.Ev, e.Fault = chaos.EvFault, string(f); _ = r.ledger.Write(e) }
	switch f {
	case Kill:
		w := r.waitLiveWorker()
		if w == nil {
			return false
		}
		w.kill()
		if r.sc.Plugin {
			r.checkOrphans("after worker " + w.name + " was killed")
		}
		if err := w.restart(); err != nil {
			r.fail(ErrorCat, "restarting worker %s: %v", w.name, err)
			return false
		}
		mark(chaos.Entry{Detail: w.name})
		_ = w.waitReady(15 * time.Second) // a worker that cannot start is restarted by supervise
	case Pause:
		w := r.waitLiveWorker()
		if w == nil {
			return false
		}
		d := r.sc.PauseFor
		if d == 0 {
			d = r.env.Profile.Lease * 5 / 2
		}
		blocks := r.liveWorkers() == 1
		mark(chaos.Entry{Phase: "begin", Detail: w.name, Blocks: blocks})
		w.pause(true)
		time.Sleep(d)
		w.pause(false)
		mark(chaos.Entry{Phase: "end", Detail: w.name, Blocks: blocks})
	case Terminate:
		n, err := r.b.terminate(ctx)
		if err != nil {
			r.fail(ErrorCat, "terminating connections: %v", err)
			return false
		}
		mark(chaos.Entry{Detail: fmt.Sprintf("%d connections", n)})
	case Cut:
		ab, ok := r.b.(*amqpBackend)
		if !ok {
			r.fail(ErrorCat, "cut: only the RabbitMQ trials go through the proxy")
			return false
		}
		mark(chaos.Entry{Detail: fmt.Sprintf("%d connections", ab.cut())})
	case RestartGraceful, RestartCrash:
		mode := servers.Graceful
		if f == RestartCrash {
			mode = servers.Crash
		}
		if ab, ok := r.b.(*amqpBackend); ok && mode == servers.Crash && !r.env.Profile.Crash && !r.sc.KillNode {
			_ = ab // the bounded profile restarts the broker's application only (a node restart takes ~10 s)
			mode = servers.Graceful
		}
		mark(chaos.Entry{Phase: "begin", Detail: string(mode), Blocks: true})
		if err := r.b.restart(ctx, mode); err != nil {
			r.fail(ErrorCat, "restarting the server (%s): %v", mode, err)
		}
		mark(chaos.Entry{Phase: "end", Detail: string(mode), Blocks: true})
	case LockRow:
		var e chaos.Entry
		var ok bool
		for wait := time.Now(); time.Since(wait) < 3*time.Second; time.Sleep(10 * time.Millisecond) {
			if e, ok = r.st.inflightRow(0); ok {
				break
			}
		}
		if !ok {
			return false
		}
		d := r.sc.LockFor
		if d == 0 {
			d = 6 * time.Second
		}
		detail := fmt.Sprintf("row %d (%s)", e.Row, e.ID)
		mark(chaos.Entry{Phase: "begin", Detail: detail})
		if err := r.b.lockRow(ctx, e.Row, d); err != nil {
			r.fail(ErrorCat, "lock-row: %v", err)
		}
		mark(chaos.Entry{Phase: "end", Detail: detail})
	case DeleteDead:
		ab, ok := r.b.(*amqpBackend)
		if !ok {
			r.fail(ErrorCat, "delete-dead: RabbitMQ only")
			return false
		}
		mark(chaos.Entry{Phase: "begin", Detail: ab.dead})
		if err := ab.deleteDead(ctx, false); err != nil {
			r.fail(ErrorCat, "deleting %s: %v", ab.dead, err)
		}
		// The checker counts a dead letter confirmed until just after this line as destroyed
		// by the fault (chaos.deletedWith), not lost.
		mark(chaos.Entry{Phase: "deleted", Detail: ab.dead})
		time.Sleep(2 * time.Second)
		if err := ab.deleteDead(ctx, true); err != nil {
			r.fail(ErrorCat, "declaring %s again: %v", ab.dead, err)
		}
		mark(chaos.Entry{Phase: "end", Detail: ab.dead})
	default:
		r.fail(ErrorCat, "unknown fault %q", f)
		return false
	}
	return true
}

// checkOrphans fails the trial when plugin processes outlive their host (given 2 s to notice),
// and ends them (they are processes of this run).
func (r *run) checkOrphans(when string) {
	var left []int
	for t := time.Now(); time.Since(t) < 2*time.Second; time.Sleep(50 * time.Millisecond) {
		if left = orphans(r.env.PluginBin); len(left) == 0 {
			return
		}
	}
	r.fail(Orphan, "%d plugin processes left %s (pids %v)", len(left), when, left)
	for _, pid := range left {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
}
