// Command chaos-worker is the service the chaos suite kills: a settle App with one
// subscription on the backend, claim form and queue type its flags choose, whose handler does to
// each message what the seeded mix says (ack, drop, retry, retry after a delay, fail until the
// cap, write a side row in the delivery's transaction, kill its own process once, exit on every
// delivery), and which appends one ledger line per handler start, handler end and settlement.
//
//	chaos-worker -backend postgres -dsn postgres://postgres@127.0.0.1:55432/chaos -form lease \
//		-transactional -table jobs_1 -side-table side_1 -ledger /tmp/run/ledger -seed 7
//
// It runs until SIGTERM or SIGINT (a graceful stop), or until the driver kills it. Bad flags
// exit with status 2 and say which flag and why.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
	"github.com/settlehq/settle/core"
)

// config is the worker's flags.
type config struct {
	backend, form, queueType, delay, publish string
	transactional                            bool
	seed                                     int64
	mix                                      string
	dsn                                      string
	table, queue, dead, sideTable            string
	cap, workers, batch, prefetch            int
	ledger, name, state                      string
	lease, poll, work, retryDelay            time.Duration
	failAck                                  bool
	plugin                                   string
	pluginArgs                               string
	notify                                   bool
}

var (
	sqlBackends  = []string{"postgres", "mariadb", "sqlite"}
	amqpBackends = []string{"rabbitmq"}
	natsBackends = []string{"nats"}
)

func parse(args []string) (*config, chaos.Mix, error) {
	c := &config{}
	fs := flag.NewFlagSet("chaos-worker", flag.ContinueOnError)
	fs.StringVar(&c.backend, "backend", "", "postgres, mariadb, sqlite, rabbitmq or nats")
	fs.StringVar(&c.form, "form", "lease", "SQL claim form: lease, rowlock or advisory (sqlite: lease or advisory)")
	fs.BoolVar(&c.transactional, "transactional", false, "SQL: run handlers in the delivery's transaction (side rows need it)")
	fs.StringVar(&c.queueType, "queue-type", "classic", "rabbitmq: classic or quorum")
	fs.StringVar(&c.delay, "delay", "none", "rabbitmq: where RetryAfter copies wait: none (the mix must have no retry_after), inprocess or dlxttl")
	fs.StringVar(&c.publish, "publish", "default", "rabbitmq classic: copies' publish policy: default, confirmed or fire-and-forget")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the handler mix")
	fs.StringVar(&c.mix, "mix", chaos.DefaultMix, "handler mix: kind=weight,…")
	fs.StringVar(&c.dsn, "dsn", "", "postgres URL, MariaDB DSN, SQLite file path, AMQP or NATS URL (loopback only)")
	fs.StringVar(&c.table, "table", "", "SQL queue table ([schema.]name)")
	fs.StringVar(&c.queue, "queue", "q", "SQL: the queue's group; rabbitmq: the queue's name")
	fs.StringVar(&c.dead, "dead", "dead", "dead-letter group (SQL) or queue (rabbitmq)")
	fs.StringVar(&c.sideTable, "side-table", "", "SQL transactional: the table side rows go to")
	fs.IntVar(&c.cap, "cap", 3, "DeadLetterAfter cap")
	fs.IntVar(&c.workers, "workers", 4, "concurrent handlers")
	fs.IntVar(&c.batch, "batch", 0, "SQL: rows per claim (0: the engine's default)")
	fs.IntVar(&c.prefetch, "prefetch", 0, "rabbitmq: prefetch (0: the transport's default)")
	fs.StringVar(&c.ledger, "ledger", "", "ledger file (appended, one write per line)")
	fs.StringVar(&c.name, "name", "w", "this worker's name in the ledger")
	fs.StringVar(&c.state, "state", "", "directory of self_kill markers (one kill per message)")
	fs.DurationVar(&c.lease, "lease", 2*time.Second, "SQL lease form: the lease; nats: the consumer's AckWait")
	fs.DurationVar(&c.poll, "poll", 100*time.Millisecond, "SQL: poll interval")
	fs.DurationVar(&c.work, "work", 10*time.Millisecond, "mean handler time (uniform in [0, 2×work))")
	fs.DurationVar(&c.retryDelay, "retry-delay", 300*time.Millisecond, "the retry_after kind's delay")
	fs.BoolVar(&c.failAck, "fail-ack", false, "SQL: a custom ack event that fails for fail_ack messages")
	fs.StringVar(&c.plugin, "plugin", "", "SQL: an eventplugin binary that renders the ack")
	fs.StringVar(&c.pluginArgs, "plugin-args", "", "space-separated arguments for -plugin")
	fs.BoolVar(&c.notify, "notify", true, "postgres: LISTEN/NOTIFY wake-ups")
	if err := fs.Parse(args); err != nil {
		return nil, chaos.Mix{}, err
	}
	if fs.NArg() > 0 {
		return nil, chaos.Mix{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	mix, err := chaos.ParseMix(c.mix, c.seed)
	if err != nil {
		return nil, chaos.Mix{}, fmt.Errorf("-mix: %w", err)
	}
	if err := c.validate(mix); err != nil {
		return nil, chaos.Mix{}, err
	}
	return c, mix, nil
}

func (c *config) isSQL() bool { return contains(sqlBackends, c.backend) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *config) validate(mix chaos.Mix) error {
	switch {
	case c.backend == "":
		return errors.New("-backend is required: postgres, mariadb, sqlite, rabbitmq or nats")
	case !c.isSQL() && !contains(amqpBackends, c.backend) && !contains(natsBackends, c.backend):
		return fmt.Errorf("-backend %q: postgres, mariadb, sqlite, rabbitmq or nats", c.backend)
	case c.dsn == "":
		return fmt.Errorf("-dsn is required for -backend %s", c.backend)
	case c.ledger == "":
		return errors.New("-ledger is required")
	case c.cap < 1:
		return fmt.Errorf("-cap %d: at least 1", c.cap)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: at least 1", c.workers)
	case c.work < 0:
		return fmt.Errorf("-work %v: must not be negative", c.work)
	case mix.Has(chaos.SelfKill) && c.state == "":
		return errors.New("-state is required when the mix has self_kill (its markers allow one kill per message)")
	}
	if c.isSQL() {
		switch {
		case !contains([]string{"lease", "rowlock", "advisory"}, c.form):
			return fmt.Errorf("-form %q: lease, rowlock or advisory", c.form)
		case c.backend == "sqlite" && c.form == "rowlock":
			return errors.New("-form rowlock: SQLite has no row locks; use lease or advisory")
		case c.table == "":
			return errors.New("-table is required for a SQL backend")
		case c.transactional && c.sideTable == "" && (mix.Has(chaos.Side) || mix.Has(chaos.SideDrop) || mix.Has(chaos.SideRetry) || mix.Has(chaos.SelfKill)):
			return errors.New("-side-table is required: the mix writes side rows")
		case !c.transactional && (mix.Has(chaos.Side) || mix.Has(chaos.SideDrop) || mix.Has(chaos.SideRetry)):
			return errors.New("-mix has side-row kinds (side, side_drop, side_retry): they need -transactional")
		case c.lease <= 0:
			return fmt.Errorf("-lease %v: must be positive", c.lease)
		case c.plugin != "" && c.failAck:
			return errors.New("-plugin and -fail-ack both replace the ack event; give one")
		}
		if c.backend != "sqlite" {
			if err := servers.CheckLoopback(hostOf(c.backend, c.dsn)); err != nil {
				return fmt.Errorf("-dsn: %w", err)
			}
		}
		return nil
	}
	if c.backend == "nats" {
		switch {
		case c.transactional || c.failAck || c.plugin != "":
			return errors.New("-transactional, -fail-ack and -plugin are for SQL backends")
		case mix.Has(chaos.Side) || mix.Has(chaos.SideDrop) || mix.Has(chaos.SideRetry):
			return errors.New("-mix has side-row kinds: NATS has no transaction to write them in")
		case c.lease <= 0:
			return fmt.Errorf("-lease %v: must be positive", c.lease)
		}
		return servers.CheckLoopback(hostOf(c.backend, c.dsn))
	}
	switch {
	case !contains([]string{"classic", "quorum"}, c.queueType):
		return fmt.Errorf("-queue-type %q: classic or quorum", c.queueType)
	case !contains([]string{"none", "inprocess", "dlxttl"}, c.delay):
		return fmt.Errorf("-delay %q: none, inprocess or dlxttl", c.delay)
	case c.delay == "none" && mix.Has(chaos.RetryAfter):
		return errors.New("-delay none: the mix has retry_after; choose -delay inprocess or dlxttl, or take retry_after out of -mix")
	case !contains([]string{"default", "confirmed", "fire-and-forget"}, c.publish):
		return fmt.Errorf("-publish %q: default, confirmed or fire-and-forget", c.publish)
	case c.publish != "default" && c.queueType == "quorum":
		return errors.New("-publish: a quorum queue takes no publish policy")
	case c.transactional || c.failAck || c.plugin != "":
		return errors.New("-transactional, -fail-ack and -plugin are for SQL backends")
	case mix.Has(chaos.Side) || mix.Has(chaos.SideDrop) || mix.Has(chaos.SideRetry):
		return errors.New("-mix has side-row kinds: RabbitMQ has no transaction to write them in")
	}
	if err := servers.CheckLoopback(hostOf(c.backend, c.dsn)); err != nil {
		return fmt.Errorf("-dsn: %w", err)
	}
	return nil
}

// hostOf extracts host:port from a postgres or AMQP URL or a MariaDB DSN.
func hostOf(backend, dsn string) string {
	if backend == "mariadb" {
		if _, rest, ok := strings.Cut(dsn, "@tcp("); ok {
			if hp, _, ok := strings.Cut(rest, ")"); ok {
				return hp
			}
		}
		return dsn
	}
	rest := dsn
	if _, r, ok := strings.Cut(dsn, "://"); ok {
		rest = r
	}
	if _, r, ok := strings.Cut(rest, "@"); ok {
		rest = r
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// worker is one running worker process.
type worker struct {
	cfg    *config
	mix    chaos.Mix
	ledger *chaos.Ledger
	log    *slog.Logger
	// side writes a message's side row in the delivery's transaction (SQL, transactional).
	side func(ctx context.Context, id string, attempt int) error
	// describe fills what a delivery shows of itself (row id, delivery tag).
	describe func(core.Delivery, *chaos.Entry)
	// noteRow remembers which row a fail_ack message is (for the failing ack event).
	noteRow func(core.Delivery, chaos.Kind)
}

type payload struct {
	ID string `json:"id"`
}

// messageID reads the message id from a payload; "" when it has none.
func messageID(body []byte) string {
	var p payload
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.ID
}

func (w *worker) entry(d core.Delivery) chaos.Entry {
	e := chaos.Entry{ID: messageID(d.Body()), Attempt: d.Attempt()}
	w.describe(d, &e)
	return e
}

// handle does to m what its kind says.
func (w *worker) handle(ctx context.Context, m *core.Message[payload]) error {
	d := m.Delivery()
	e := w.entry(d)
	e.Ev = chaos.EvStart
	_ = w.ledger.Write(e)
	kind := w.mix.Kind(m.Payload.ID)
	if w.noteRow != nil {
		w.noteRow(d, kind)
	}
	if w.cfg.work > 0 {
		t := time.NewTimer(time.Duration(rand.Int64N(int64(2 * w.cfg.work))))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	err := w.outcome(ctx, m, kind)
	e.Ev, e.Outcome = chaos.EvEnd, outcomeName(err)
	if err != nil && e.Outcome == "error" {
		e.Err = err.Error()
	}
	_ = w.ledger.Write(e)
	return err
}

func (w *worker) outcome(ctx context.Context, m *core.Message[payload], kind chaos.Kind) error {
	id, attempt := m.Payload.ID, m.Attempt()
	writeSide := func() error {
		if w.side == nil {
			return nil
		}
		if err := w.side(ctx, id, attempt); err != nil {
			return fmt.Errorf("side row of %s: %w", id, err)
		}
		return nil
	}
	switch kind {
	case chaos.Ack, chaos.FailAck:
		return nil
	case chaos.Drop:
		return core.Drop()
	case chaos.Retry:
		if attempt <= 1 {
			return core.Retry()
		}
		return nil
	case chaos.RetryAfter:
		if attempt <= 1 {
			return core.RetryAfter(w.cfg.retryDelay)
		}
		return nil
	case chaos.Fail:
		return core.Retry().Because(errors.New("chaos: fail kind retries every time"))
	case chaos.Side:
		return writeSide()
	case chaos.SideDrop:
		if err := writeSide(); err != nil {
			return err
		}
		return core.Drop()
	case chaos.SideRetry:
		if err := writeSide(); err != nil {
			return err
		}
		if attempt <= 1 {
			return core.Retry()
		}
		return nil
	case chaos.SelfKill:
		if err := writeSide(); err != nil {
			return err
		}
		marker := filepath.Join(w.cfg.state, id+".killed")
		f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil // killed once already: acknowledge
		}
		_ = f.Sync()
		_ = f.Close()
		_ = w.ledger.Write(chaos.Entry{Ev: chaos.EvExit, ID: id, Attempt: attempt, Outcome: "self_kill"})
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it
	case chaos.Poison:
		_ = w.ledger.Write(chaos.Entry{Ev: chaos.EvExit, ID: id, Attempt: attempt, Outcome: "poison"})
		os.Exit(3)
	}
	return fmt.Errorf("chaos-worker: unknown kind %v", kind)
}

func outcomeName(err error) string {
	if err == nil {
		return "ack"
	}
	if o, ok := core.AsOutcome(err); ok {
		return o.Kind().String()
	}
	return "error"
}

func main() {
	cfg, mix, err := parse(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "chaos-worker:", err)
		os.Exit(2)
	}
	if err := run(cfg, mix); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-worker:", err)
		os.Exit(1)
	}
}

func run(cfg *config, mix chaos.Mix) error {
	ledger, err := chaos.OpenLedger(cfg.ledger, cfg.name)
	if err != nil {
		return err
	}
	defer ledger.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", cfg.name)
	w := &worker{cfg: cfg, mix: mix, ledger: ledger, log: log, describe: func(core.Delivery, *chaos.Entry) {}}
	describe := func(d core.Delivery) chaos.Entry { return w.entry(d) }
	app := core.New(core.WithLogger(log), core.WithShutdownTimeout(5*time.Second),
		core.WithObserver(ledger.Settled(describe)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var ep core.Endpoint
	var opts []core.Option
	var closeFn func()
	switch {
	case cfg.isSQL():
		ep, opts, closeFn, err = setupSQL(ctx, app, w)
	case cfg.backend == "nats":
		ep, opts, closeFn, err = setupNATS(app, w)
	default:
		ep, opts, closeFn, err = setupAMQP(app, w)
	}
	if err != nil {
		return err
	}
	if closeFn != nil {
		defer closeFn()
	}
	opts = append(opts, core.DeadLetterAfter(cfg.cap, cfg.dead), core.Workers(cfg.workers))
	if err := core.Subscribe(app, ep, w.handle, opts...); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	go func() {
		select {
		case <-app.Ready():
			_ = ledger.Write(chaos.Entry{Ev: chaos.EvReady})
		case <-ctx.Done():
		}
	}()
	if err := app.Run(ctx); err != nil {
		return err
	}
	_ = ledger.Write(chaos.Entry{Ev: chaos.EvExit, Outcome: "stopped"})
	return nil
}
