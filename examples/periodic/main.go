// Command periodic is a heartbeat job in a service with several processes: run it two or three
// times on one SQLite file and each tick is published by one of them.
//
//	go run ./examples/periodic -db periodic.db
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/periodic"
	"github.com/settlehq/settle/dialect-sqlite"
)

func main() {
	path := flag.String("db", "periodic.db", "SQLite database file shared by the processes")
	every := flag.Duration("every", 2*time.Second, "interval of the heartbeat")
	flag.Parse()
	if err := run(context.Background(), *path, *every); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "periodic:", err)
		os.Exit(1)
	}
}

// Heartbeat is the job's message.
type Heartbeat struct {
	Tick time.Time `json:"tick"`
	PID  int       `json:"pid"`
}

func run(ctx context.Context, path string, every time.Duration) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	ddl, err := periodic.DDL(db.Dialect(), "settle_ticks")
	if err != nil {
		return err
	}
	if _, err := db.Pool().ExecContext(ctx, ddl); err != nil {
		return err
	}
	app := core.New(core.WithLogger(log))
	// The in-process broker stands for the service's queue; the claims are in the shared file.
	broker := coretest.NewBroker(app.Clock(), log)
	defer broker.Close()
	beats, err := core.NewPublisher[Heartbeat](broker.Queue("heartbeats"))
	if err != nil {
		return err
	}
	claims, err := periodic.NewSQLClaims(db.Dialect(), db.Queue(), "settle_ticks", app.Clock())
	if err != nil {
		return err
	}
	sched, err := periodic.New(claims, periodic.WithClock(app.Clock()), periodic.WithLogger(log))
	if err != nil {
		return err
	}
	sch, err := periodic.Every(every)
	if err != nil {
		return err
	}
	err = periodic.Add(sched, "heartbeat", sch, beats, func(_ context.Context, t periodic.Tick) (Heartbeat, error) {
		fmt.Printf("%s published by process %d\n", t.ID, os.Getpid())
		return Heartbeat{Tick: t.At, PID: os.Getpid()}, nil
	}, periodic.CatchUpLast(time.Minute))
	if err != nil {
		return err
	}
	app.Register(sched)
	return app.Run(ctx)
}
