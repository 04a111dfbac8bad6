// A user's first program with the RabbitMQ transport, built by ci/consumer.sh in a fresh
// module outside the workspace from the published modules: on the RabbitMQ at the URL given as
// its argument it declares a classic queue of its own, publishes one message, acknowledges it
// in a handler, checks that the queue is empty and deletes the queue.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

type refund struct {
	ID int `json:"id"`
}

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer-amqp:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	queue := "settle-consumer-" + hex.EncodeToString(b)

	broker, err := amqp.New(amqp.URL(url), amqp.DeclareTopology(true))
	if err != nil {
		return err
	}
	app := core.New(core.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))), core.WithoutSignals())
	app.Register(broker)
	refunds, err := amqp.Classic(broker, queue)
	if err != nil {
		return err
	}
	handled := make(chan refund, 1)
	if err := core.Subscribe(app, refunds, func(_ context.Context, m *core.Message[refund]) error {
		handled <- m.Payload
		return nil
	}); err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer deleteQueue(url, queue)
	select {
	case <-app.Ready():
	case err := <-done:
		stop()
		return fmt.Errorf("App.Run: %w", err)
	}
	if err := amqp.Publish(ctx, broker, "", queue, refund{ID: 7}); err != nil {
		stop()
		return err
	}
	var got refund
	select {
	case got = <-handled:
	case <-ctx.Done():
		stop()
		return fmt.Errorf("no message handled within the deadline: %w", ctx.Err())
	}
	stop()
	if err := <-done; err != nil {
		return fmt.Errorf("App.Run: %w", err)
	}
	left, err := depth(url, queue)
	if err != nil {
		return err
	}
	if got.ID != 7 || left != 0 {
		return fmt.Errorf("handled %+v, %d messages left; want refund 7 and an empty queue", got, left)
	}
	fmt.Println("amqp: published, handled and acknowledged one message on", queue)
	return nil
}

func depth(url, queue string) (int, error) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return q.Messages, err
}

func deleteQueue(url, queue string) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(queue, false, false, false)
	}
}
