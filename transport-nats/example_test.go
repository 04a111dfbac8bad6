package natsjs_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/settlehq/settle/core"
	natsjs "github.com/settlehq/settle/transport-nats"
	"github.com/settlehq/settle/transport-nats/natstest"
)

type refund struct {
	Ref   string `json:"ref"`
	Cents int    `json:"cents"`
}

// A refunds service on JetStream: the queue's stream and durable consumer are declared at
// start, a busy processor retries once, and a refund that keeps failing would move to
// refunds.dead after five deliveries. The example runs on an embedded nats-server; give
// natsjs.New a real server's URL ("nats://127.0.0.1:4222") instead.
func Example() {
	dir, _ := os.MkdirTemp("", "natsjs-example-")
	defer os.RemoveAll(dir)
	srv, err := natstest.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()

	log := slog.New(slog.DiscardHandler)
	conn, err := natsjs.New(srv.URL(), natsjs.DeclareTopology(true), natsjs.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return
	}
	app := core.New(core.WithLogger(log), core.WithoutSignals())
	app.Register(conn)
	refunds, err := natsjs.NewQueue(conn, "refunds")
	if err != nil {
		fmt.Println(err)
		return
	}
	said := make(chan string, 2)
	handle := func(_ context.Context, m *core.Message[refund]) error {
		if m.Attempt() == 1 {
			said <- fmt.Sprintf("%s: processor busy, retrying", m.Payload.Ref)
			return core.Retry()
		}
		said <- fmt.Sprintf("%s: refunded %d cents on attempt %d", m.Payload.Ref, m.Payload.Cents, m.Attempt())
		return nil
	}
	if err := core.Subscribe(app, refunds, handle, core.DeadLetterAfter(5, "refunds.dead")); err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	<-app.Ready()

	ack, err := natsjs.Publish(ctx, conn, "refunds", refund{Ref: "r-42", Cents: 1250}, natsjs.WithMsgID("r-42"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stored in stream %s at sequence %d\n", ack.Stream, ack.Sequence)
	fmt.Println(<-said)
	fmt.Println(<-said)
	stop()
	if err := <-ran; err != nil {
		fmt.Println(err)
	}
	// Output:
	// stored in stream refunds at sequence 1
	// r-42: processor busy, retrying
	// r-42: refunded 1250 cents on attempt 2
}
