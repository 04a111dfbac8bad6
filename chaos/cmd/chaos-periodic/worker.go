package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/periodic"
	"github.com/settlehq/settle/dialect-sqlite"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// fileTarget is the trial's publish target: a ledger file every process appends one line to
// per message it publishes ("<message id> <pid>"), one write(2) and an fsync each, so that a
// line is there once Send returns and survives the process's SIGKILL.
type fileTarget struct {
	path string
	mu   sync.Mutex
}

func (f *fileTarget) Queue() string                               { return "ledger" }
func (f *fileTarget) Sender(context.Context) (core.Sender, error) { return f, nil }
func (f *fileTarget) Clock() clock.Clock                          { return clock.Real() }

func (f *fileTarget) Send(_ context.Context, msgs []core.Outgoing) []core.Receipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := make([]core.Receipt, len(msgs))
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		for i := range rs {
			rs[i].Err = err
		}
		return rs
	}
	defer file.Close()
	for i, m := range msgs {
		rs[i].ID = m.ID
		if _, err := file.WriteString(m.ID + " " + strconv.Itoa(os.Getpid()) + "\n"); err != nil {
			rs[i].Err = err
			continue
		}
		rs[i].Err = file.Sync()
	}
	return rs
}

type beat struct {
	Tick time.Time `json:"tick"`
}

// runWorker runs one process of the service: a scheduler with an every-second job whose claims
// are in the SQLite file (SQLClaims) or a NATS bucket (natsjs.TickClaims).
func runWorker(backend, db, url, bucket, ledger string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	app := core.New(core.WithLogger(log), core.WithoutSignals())
	var claims periodic.Claimer
	switch backend {
	case "sqlite":
		sdb, err := sqlite.Open(ctx, db)
		if err != nil {
			return err
		}
		defer sdb.Close()
		if claims, err = periodic.NewSQLClaims(sdb.Dialect(), sdb.Queue(), "ticks", app.Clock()); err != nil {
			return err
		}
	case "nats":
		c, err := natsjs.New(url, natsjs.WithLogger(log))
		if err != nil {
			return err
		}
		app.Register(c)
		if claims, err = natsjs.NewTickClaims(c, bucket, time.Hour); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown backend %q (sqlite, nats)", backend)
	}
	sched, err := periodic.New(claims, periodic.WithClock(app.Clock()), periodic.WithLogger(log))
	if err != nil {
		return err
	}
	pub, err := core.NewPublisher[beat](&fileTarget{path: ledger})
	if err != nil {
		return err
	}
	every, _ := periodic.Every(time.Second)
	if err := periodic.Add(sched, "beat", every, pub, func(_ context.Context, t periodic.Tick) (beat, error) {
		return beat{Tick: t.At}, nil
	}); err != nil {
		return err
	}
	app.Register(sched)
	go func() {
		select {
		case <-app.Ready():
			fmt.Println("ready")
		case <-ctx.Done():
		}
	}()
	if err := app.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
