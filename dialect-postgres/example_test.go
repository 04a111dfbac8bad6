package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	postgres "github.com/settlehq/settle/dialect-postgres"
)

type refund struct {
	Card   string `json:"card"`
	Amount int    `json:"amount"`
}

var errBusy = errors.New("processor busy")

func charge(r refund) error {
	if r.Card == "busy" {
		return errBusy
	}
	return nil
}

// A refunds service on a PostgreSQL queue table in the lease form, with a dead letter after
// five attempts and cross-process wake-ups. It needs a server, so it has no Output line: go
// test compiles it without running it.
func Example() {
	ctx := context.Background()
	db, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", postgres.Notify(true))
	if err != nil {
		log.Fatal(err)
	}
	table := sqlqueue.StandardTable("refunds_queue")
	if err := postgres.CreateTable(ctx, db, table); err != nil {
		log.Fatal(err)
	}

	app := core.New()
	app.Register(db)
	refunds, err := postgres.Lease(db, table, "refunds")
	if err != nil {
		log.Fatal(err)
	}
	err = core.Subscribe(app, refunds, func(ctx context.Context, m *core.Message[refund]) error {
		if err := charge(m.Payload); errors.Is(err, errBusy) {
			return core.RetryAfter(time.Duration(m.Attempt()) * time.Second).Because(err)
		}
		return nil
	}, core.DeadLetterAfter(5, "refunds.dead"), core.Workers(8))
	if err != nil {
		log.Fatal(err)
	}

	pub, err := postgres.NewPublisher(db, table, "refunds")
	if err != nil {
		log.Fatal(err)
	}
	id, err := sqlqueue.Publish(ctx, pub, refund{Card: "4242", Amount: 1200})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published refund", id)
	if err := app.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
