package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/inbox"
	"github.com/settlehq/settle/dialect-sqlite"
	amqp "github.com/settlehq/settle/transport-amqp"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// workerConfig is what the driver tells a worker process.
type workerConfig struct {
	backend, url, queue, db string
	killEvery               int    // SIGKILL itself after the commit of about one message in killEvery
	generation              uint64 // the worker's start count: which messages it kills itself on
}

// ranKey marks, in the handler's context, that the handler ran (the inbox did not find the id).
type ranKey struct{}

// runWorker consumes the queue behind an inbox on the SQLite file: the handler writes the
// message's id into the side table through the inbox's transaction. After the inbox committed,
// and before settle acknowledges, the worker SIGKILLs itself for some messages: the commit is
// durable, the ack never sent.
func runWorker(cfg workerConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db, err := sqlite.Open(ctx, cfg.db)
	if err != nil {
		return err
	}
	defer db.Close()
	app := core.New(core.WithLogger(log), core.WithoutSignals())
	// Each duplicate is one line written at once (unbuffered), so the count survives a SIGKILL.
	dup := inbox.OnDuplicate(func(_ string, d core.Delivery) { fmt.Println("duplicate " + d.ID()) })
	box, err := inbox.New(db.Dialect(), db.Queue(), "inbox", inbox.WithLogger(log), inbox.WithClock(app.Clock()), dup)
	if err != nil {
		return err
	}
	app.Register(box)
	ep, err := endpoint(app, cfg, log)
	if err != nil {
		return err
	}
	insert := "INSERT INTO side (id) VALUES (?)"
	handle := func(ctx context.Context, m *core.Message[[]byte]) error {
		tx, err := inbox.Tx(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, m.ID()); err != nil {
			return err
		}
		if ran, ok := ctx.Value(ranKey{}).(*bool); ok {
			*ran = true
		}
		return nil
	}
	killer := func(next core.HandlerFunc) core.HandlerFunc {
		return func(ctx context.Context, d core.Delivery) error {
			ran := false
			err := next(context.WithValue(ctx, ranKey{}, &ran), d)
			if err == nil && ran && cfg.killEvery > 0 && pick(d.ID(), cfg.generation, cfg.killEvery) {
				// Committed, not acknowledged: the broker delivers the message again.
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			return err
		}
	}
	if err := core.Subscribe(app, ep, handle, core.Use(killer), box.Receive(), core.Workers(4), core.WithCodec(core.Raw)); err != nil {
		return err
	}
	go func() {
		select {
		case <-app.Ready():
			fmt.Println("ready")
		case <-ctx.Done():
		}
	}()
	err = app.Run(ctx)
	st := box.Stats()
	fmt.Printf("stats recorded=%d duplicates=%d\n", st.Recorded, st.Duplicates)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// pick chooses about one message in every n, a different choice in each generation.
func pick(id string, gen uint64, n int) bool {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return (h.Sum64()^(gen*0x9E3779B97F4A7C15))%uint64(n) == 0
}

func endpoint(app *core.App, cfg workerConfig, log *slog.Logger) (core.Endpoint, error) {
	switch cfg.backend {
	case "classic", "quorum":
		b, err := amqp.New(amqp.URL(cfg.url), amqp.DeclareTopology(true), amqp.WithLogger(log),
			amqp.ReconnectBackoff(50*time.Millisecond, time.Second))
		if err != nil {
			return nil, err
		}
		app.Register(b)
		if cfg.backend == "quorum" {
			return amqp.Quorum(b, cfg.queue)
		}
		return amqp.Classic(b, cfg.queue)
	case "nats":
		c, err := natsjs.New(cfg.url, natsjs.DeclareTopology(true), natsjs.WithLogger(log))
		if err != nil {
			return nil, err
		}
		app.Register(c)
		return natsjs.NewQueue(c, cfg.queue, natsjs.AckWait(5*time.Second))
	}
	return nil, fmt.Errorf("unknown backend %q (classic, quorum, nats)", cfg.backend)
}
