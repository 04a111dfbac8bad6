package settlewatermill_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// A Watermill router on SQLite, with its Retry and PoisonQueue middleware replaced by settle's
// cap and dead letter: core.DeadLetterAfter(3, "orders.dead") on the subscriber. A handler's
// error nacks the message; settle retries it, counts the attempt in the row (so the cap holds
// even if the process dies mid-message, which Watermill's in-memory Retry cannot), and at the
// third failure moves it to the dead letter queue "orders.dead" with the count, the origin,
// the time and the last error (which RecordErrors passes from the router to settle), where a Watermill subscriber reads it like any topic.
func Example_router() {
	dir, _ := os.MkdirTemp("", "settlewatermill-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "orders.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	table := sqlqueue.StandardTable("watermill")
	table.Columns.LastError = "last_error" // a waiting row says why its last attempt failed
	topics, err := settlewatermill.SQL(db, table, sqlite.Lease, sqlite.NewPublisher, settlewatermill.CreateTables())
	if err != nil {
		fmt.Println(err)
		return
	}
	quiet := slog.New(slog.DiscardHandler)
	pub, _ := settlewatermill.NewPublisher(topics)
	sub, _ := settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(quiet),
		settlewatermill.Mount(core.DeadLetterAfter(3, "orders.dead")))

	router, _ := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	router.AddMiddleware(settlewatermill.RecordErrors) // the dead letter says why
	router.AddConsumerHandler("ship", "orders", sub, func(m *message.Message) error {
		attempt := m.Metadata.Get(settlewatermill.MetadataAttempt)
		if string(m.Payload) == "poison" {
			fmt.Println(m.UUID, "attempt", attempt+": failed")
			return errors.New("no such warehouse")
		}
		fmt.Println(m.UUID, "attempt", attempt+": shipped")
		return nil
	})
	go func() { _ = router.Run(ctx) }()
	<-router.Running()

	_ = pub.Publish("orders", message.NewMessage("order-1", []byte("books")), message.NewMessage("order-2", []byte("poison")))

	dead, _ := settlewatermill.NewSubscriber(topics, settlewatermill.WithLogger(quiet))
	letters, _ := dead.Subscribe(ctx, "orders.dead")
	m := <-letters
	fmt.Println("dead letter:", m.UUID, "from", m.Metadata.Get(core.HeaderOrigin),
		"after", m.Metadata.Get(core.HeaderRetryCount), "attempts:", m.Metadata.Get(core.HeaderError))
	m.Ack()

	_ = router.Close()
	_ = dead.Close()
	// Output:
	// order-1 attempt 1: shipped
	// order-2 attempt 1: failed
	// order-2 attempt 2: failed
	// order-2 attempt 3: failed
	// dead letter: order-2 from orders after 3 attempts: retry at attempt 3 of 3: no such warehouse
}
