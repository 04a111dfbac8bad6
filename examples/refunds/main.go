// Command refunds is settle's first example: a refunds service on a SQLite queue table.
//
//	go run ./examples/refunds                 # seed samples, process them, print a summary, exit
//	go run ./examples/refunds -serve          # keep consuming what other processes insert
//	go run ./examples/refunds -db /tmp/r.db -backoff 50ms
//
// A fake processor refuses by card: "busy…" → RetryAfter(backoff, doubled per attempt),
// "down…" → Retry(), "closed…" → Drop() with a warning, anything else → ack. After 5 attempts a
// refund moves to the refunds.dead group, whose handler logs it. See README.md.
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
	"syscall"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// Config is what the flags set.
type Config struct {
	DB      string
	Backoff time.Duration
	Serve   bool
	Poll    time.Duration
}

func main() {
	var c Config
	flag.StringVar(&c.DB, "db", "refunds.db", "SQLite database file")
	flag.DurationVar(&c.Backoff, "backoff", 100*time.Millisecond, "base backoff of a busy processor (doubled per attempt)")
	flag.BoolVar(&c.Serve, "serve", false, "keep consuming until interrupted instead of running the demo")
	flag.DurationVar(&c.Poll, "poll", 200*time.Millisecond, "how often an idle queue is polled")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, c, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "refunds:", err)
		os.Exit(1)
	}
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
	db, err := sqlite.Open(c.DB)
	if err != nil {
		return err
	}
	table := sqlqueue.StandardTable("refunds")
	if err := db.CreateTable(ctx, table); err != nil {
		db.Close()
		return fmt.Errorf("creating the refunds table: %w", err)
	}
	tally := NewTally()
	app := core.New(append([]core.AppOption{core.WithLogger(log), core.WithObserver(tally.Observe), core.WithoutSignals()}, appOpts...)...)
	app.Register(db)
	main, err := sqlite.Lease(db, table, Queue)
	if err != nil {
		return err
	}
	dead, err := sqlite.Lease(db, table, DeadQueue)
	if err != nil {
		return err
	}
	if err := Mount(app, main, dead, c.Backoff, sqlqueue.PollInterval(c.Poll)); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !c.Serve {
		pub, err := sqlite.NewPublisher(db, table, Queue, sqlqueue.PublishClock(app.Clock()))
		if err != nil {
			return err
		}
		if err := Seed(ctx, pub, tally); err != nil {
			return fmt.Errorf("seeding: %w", err)
		}
		fmt.Fprintf(out, "seeded %d refunds into %s; processing…\n", len(Samples), c.DB)
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
	}
	return nil
}
