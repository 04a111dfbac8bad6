// Command inbox is a payments service that consumes payments from RabbitMQ and books each one
// once, however often the broker delivers it: the inbox records the message id in the booking's
// transaction, and the outbox records the receipt there too, so each payment's effects — the
// ledger row and the receipt sent on — happen once.
//
//	go run ./examples/inbox -db payments.db -amqp amqp://guest:guest@127.0.0.1:5672/
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/dialect-sqlite"
	"github.com/settlehq/settle/transport-amqp"
)

func main() {
	path := flag.String("db", "payments.db", "SQLite database file")
	url := flag.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL")
	queue := flag.String("queue", "payments", "queue of payments")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *path, *url, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "inbox:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, path, url, queue string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	app := core.New(core.WithLogger(log))
	b, err := amqp.New(amqp.URL(url), amqp.DeclareTopology(true), amqp.WithLogger(log), amqp.WithClock(app.Clock()))
	if err != nil {
		return err
	}
	app.Register(b)
	s, err := NewService(ctx, app, app.Clock(), db.Dialect(), db.Queue(), "", amqp.OutboxPublisher(b, "", "payments-"), log)
	if err != nil {
		return err
	}
	payments, err := amqp.Classic(b, queue)
	if err != nil {
		return err
	}
	if err := s.Subscribe(app, payments, core.DeadLetterAfter(5, queue+".dead")); err != nil {
		return err
	}
	return app.Run(ctx)
}
