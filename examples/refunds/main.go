// Command refunds is settle's first example: a refunds service on a SQLite queue table, on
// RabbitMQ with payouts beside the refunds, or on NATS JetStream.
//
//	go run ./examples/refunds                 # seed samples, process them, print a summary, exit
//	go run ./examples/refunds -serve          # keep consuming what other processes insert
//	go run ./examples/refunds -db /tmp/r.db -backoff 50ms
//	go run ./examples/refunds -amqp amqp://guest:guest@localhost:5672/          # the same on RabbitMQ
//	go run ./examples/refunds -amqp amqp://guest:guest@localhost:5672/ -serve
//	go run ./examples/refunds publish -amqp amqp://… -queue refunds -ref r-42 -card busy-1 -cents 500
//	go run ./examples/refunds -nats embedded                # on an in-process nats-server
//	go run ./examples/refunds -nats nats://127.0.0.1:4222 -serve
//	go run ./examples/refunds publish -nats nats://127.0.0.1:4222 -ref r-43 -card down-1
//	go run ./examples/refunds -serve -metrics 127.0.0.1:9464 -trace   # /metrics, /livez, /readyz; spans on stdout
//
// A fake processor refuses by card: "busy…" → RetryAfter(backoff, doubled per attempt),
// "down…" → Retry(), "closed…" → Drop() with a warning, anything else → ack. After 5 attempts a
// refund moves to refunds.dead, whose handler logs it. On RabbitMQ (-amqp, or REFUNDS_AMQP_URL)
// refunds live in the classic queue refunds, whose delayed retries wait in the waiting queue
// refunds.retry (amqp.DLXTTL), and payouts in the quorum queue payouts, which moves a payout to
// payouts.dead after its fifth delivery by itself. On NATS (-nats URL, or -nats embedded for an
// in-process server) refunds are a JetStream stream with a durable pull consumer, whose delayed
// retries the server holds (-NAK with delay). See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// Config is what the flags set.
type Config struct {
	DB      string
	Backoff time.Duration
	Serve   bool
	Poll    time.Duration
	// AMQP is a RabbitMQ URL (amqp://user:pass@host:port/vhost); set, the service runs on
	// RabbitMQ instead of SQLite.
	AMQP string
	// NATS is a NATS server URL (nats://host:4222, several separated by commas), or "embedded"
	// for an in-process server; set, the service runs on NATS JetStream.
	NATS string
	// Prefix goes in front of every RabbitMQ queue name or NATS subject (to keep several
	// instances apart).
	Prefix string
	// Metrics is where /metrics (Prometheus), /livez and /readyz are served; "" for nowhere.
	Metrics string
	// Trace prints every delivery's span to standard output.
	Trace bool
	// KeepDead leaves dead letters in refunds.dead (SQLite only): no handler consumes them,
	// so that settle dead ls, show, redrive and purge have something to work on.
	KeepDead bool
	// Obs is the observability the flags set up (StartObservability); nil for none.
	Obs *Observability
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refunds:", err)
		os.Exit(1)
	}
}

func run() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "publish" {
		return publishCmd(ctx, os.Args[2:])
	}
	var c Config
	flag.StringVar(&c.DB, "db", "refunds.db", "SQLite database file")
	flag.DurationVar(&c.Backoff, "backoff", DefaultBackoff, "base backoff of a busy processor (core.Backoff: full jitter, doubled per attempt up to 64×)")
	flag.BoolVar(&c.Serve, "serve", false, "keep consuming until interrupted instead of running the demo")
	flag.DurationVar(&c.Poll, "poll", DefaultPoll, "how often an idle queue is polled (SQLite)")
	flag.StringVar(&c.AMQP, "amqp", os.Getenv("REFUNDS_AMQP_URL"), "RabbitMQ URL (default $REFUNDS_AMQP_URL); set, the service runs on RabbitMQ instead of SQLite")
	flag.StringVar(&c.NATS, "nats", os.Getenv("REFUNDS_NATS_URL"), "NATS server URL, or \"embedded\" for an in-process server (default $REFUNDS_NATS_URL); set, the service runs on NATS JetStream")
	flag.StringVar(&c.Prefix, "prefix", "", "prefix of every RabbitMQ queue name or NATS subject")
	flag.StringVar(&c.Metrics, "metrics", "", "serve /metrics (Prometheus), /livez and /readyz on this address, e.g. 127.0.0.1:9464")
	flag.BoolVar(&c.Trace, "trace", false, "print every delivery's OpenTelemetry span to standard output")
	flag.BoolVar(&c.KeepDead, "keep-dead", false, "leave dead letters in refunds.dead for the settle command (SQLite only)")
	flag.Parse()
	if c.AMQP != "" && c.NATS != "" {
		return errors.New("-amqp and -nats: choose one backend")
	}
	if c.KeepDead && (c.AMQP != "" || c.NATS != "") {
		return errors.New("-keep-dead applies to SQLite only (RabbitMQ and NATS dead letters stay in refunds.dead whenever nothing consumes it)")
	}
	if asyncAPIAsked() { // settle asyncapi: the service's document instead of the service
		return ExportAsyncAPI(ctx, c)
	}
	obs, err := StartObservability(c.Metrics, c.Trace, os.Stdout, log)
	if err != nil {
		return err
	}
	defer obs.Close()
	c.Obs = obs
	appOpts := append(Info(), obs.AppOptions()...)
	switch {
	case c.NATS != "":
		url, stopServer, err := natsURL(c.NATS, log)
		if err != nil {
			return err
		}
		defer stopServer()
		return RunNATS(ctx, c, url, os.Stdout, log, appOpts...)
	case c.AMQP != "":
		return RunAMQP(ctx, c, amqp.URL(c.AMQP), os.Stdout, log, appOpts...)
	}
	return Run(ctx, c, os.Stdout, log, appOpts...)
}

// publishCmd is the publish subcommand: one refund or payout to a RabbitMQ queue, or one refund
// to a NATS subject.
func publishCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("refunds publish", flag.ContinueOnError)
	url := fs.String("amqp", os.Getenv("REFUNDS_AMQP_URL"), "RabbitMQ URL (default $REFUNDS_AMQP_URL)")
	natsURL := fs.String("nats", "", "NATS server URL: publish there instead of RabbitMQ")
	queue := fs.String("queue", Queue, "queue (RabbitMQ) or subject (NATS) to publish to (refunds or payouts; the service must have declared it)")
	var r Refund
	fs.StringVar(&r.Ref, "ref", "", "the merchant's reference, also the message id")
	fs.StringVar(&r.Card, "card", "4242-4242", "card: busy…, down…, closed… or anything else")
	fs.Int64Var(&r.Cents, "cents", 100, "amount in cents")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if r.Ref == "" || (*url == "" && *natsURL == "") {
		return errors.New("publish needs -amqp (or REFUNDS_AMQP_URL) or -nats, and -ref")
	}
	if *natsURL != "" {
		if err := PublishOneNATS(ctx, *natsURL, *queue, r); err != nil {
			return err
		}
	} else if err := PublishOne(ctx, amqp.URL(*url), *queue, r); err != nil {
		return err
	}
	fmt.Printf("published %s to %s\n", r.Ref, *queue)
	return nil
}

// Run opens the database, creates the table if needed, and runs the service: the demo (seed,
// process, summarise, return) or, with Serve, until ctx ends.
func Run(ctx context.Context, c Config, out io.Writer, log *slog.Logger, appOpts ...core.AppOption) error {
	if c.Backoff < 0 {
		return fmt.Errorf("-backoff %v: must not be negative", c.Backoff)
	}
	if c.Poll <= 0 {
		return fmt.Errorf("-poll %v: must be positive", c.Poll)
	}
	db, err := openSQLite(ctx, c.DB)
	if err != nil {
		return err
	}
	table := sqlqueue.StandardTable("refunds")
	if err := db.CreateTable(ctx, table); err != nil {
		db.Close()
		return fmt.Errorf("creating the refunds table: %w", err)
	}
	if c.Obs != nil {
		q, err := sqlqueue.NewOps(ctx, db.Dialect(), db.Queue(), table, Queue, DeadQueue)
		var stop func()
		if err == nil {
			stop, err = c.Obs.ObserveQueues(q)
		}
		if err != nil {
			db.Close()
			return fmt.Errorf("observing the refunds queue: %w", err)
		}
		defer stop() // deferred before the App closes the database: runs after
	}
	tally := NewTally()
	app := core.New(append([]core.AppOption{core.WithLogger(log), core.WithObserver(tally.Observe), core.WithoutSignals()}, appOpts...)...)
	app.Register(db)
	main, err := sqliteLease(db, table, Queue)
	if err != nil {
		return err
	}
	if c.KeepDead {
		tally.LeaveDead()
		if err := MountKeepingDead(app, main, c.Backoff, sqlqueue.PollInterval(c.Poll)); err != nil {
			return err
		}
	} else {
		dead, err := sqliteLease(db, table, DeadQueue)
		if err != nil {
			return err
		}
		if err := Mount(app, main, dead, c.Backoff, sqlqueue.PollInterval(c.Poll)); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !c.Serve {
		pub, err := sqliteNewPublisher(db, table, Queue, sqlqueue.PublishClock(app.Clock()))
		if err != nil {
			return err
		}
		if err := Seed(ctx, pub, tally); err != nil {
			return fmt.Errorf("seeding: %w", err)
		}
		fmt.Fprintf(out, "seeded %d refunds into %s (SQLite through %s); processing…\n", len(Samples), c.DB, SQLiteDialect)
		go func() {
			select {
			case <-tally.Done():
				cancel()
			case <-runCtx.Done():
			}
		}()
	}
	if err := app.Run(runCtx); err != nil {
		return err
	}
	if !c.Serve {
		select {
		case <-tally.Done():
		default:
			return errors.New("stopped before every refund ended")
		}
		tally.Print(out)
		if c.KeepDead {
			fmt.Fprintf(out, "dead letters kept in group %s of table refunds: settle dead ls --dsn sqlite://%s --table refunds --queue %s --dead %s\n",
				DeadQueue, absPath(c.DB), Queue, DeadQueue)
		}
	}
	return nil
}

// absPath is p made absolute, for a DSN that works from any directory (p itself when that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
