package redisq_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	redisq "github.com/settlehq/settle/transport-redis"
	"github.com/settlehq/settle/transport-redis/redistest"
)

type refund struct {
	Ref   string `json:"ref"`
	Cents int    `json:"cents"`
}

// A refunds service on a Redis stream: a busy processor retries once, and a refund that keeps
// failing would move to the stream "{refunds}.dead" after five attempts. The example starts a
// redis-server of its own; give redisq.Open a real server's URL ("redis://127.0.0.1:6379/0")
// instead. (It has no Output line because go test could not skip it on a machine without a
// redis-server binary: TestExample runs it and checks what it prints, or skips saying why.)
func Example() {
	dir, _ := os.MkdirTemp("", "redisq-example-")
	defer os.RemoveAll(dir)
	srv, err := redistest.Start(dir, "everysec")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	log := slog.New(slog.DiscardHandler)
	client, err := redisq.Open(srv.URL(), redisq.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return
	}
	app := core.New(core.WithLogger(log), core.WithoutSignals())
	app.Register(client)
	refunds, err := redisq.NewQueue(client, "{refunds}")
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
		said <- fmt.Sprintf("%s (id %s): refunded %d cents on attempt %d", m.Payload.Ref, m.ID(), m.Payload.Cents, m.Attempt())
		return nil
	}
	if err := core.Subscribe(app, refunds, handle, core.DeadLetterAfter(5, "{refunds}.dead")); err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	<-app.Ready()

	pub, err := core.NewPublisher[refund](refunds)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := pub.Publish(ctx, refund{Ref: "r-42", Cents: 1250}, core.MessageID("r-42"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("published", r.ID)
	fmt.Println(<-said)
	fmt.Println(<-said)
	stop()
	if err := <-ran; err != nil {
		fmt.Println(err)
	}
}

// exampleOutput is what Example prints.
const exampleOutput = `published r-42
r-42: processor busy, retrying
r-42 (id r-42): refunded 1250 cents on attempt 2
`

// TestExample runs Example where a redis-server binary can be started, and checks its output.
func TestExample(t *testing.T) {
	if _, err := redistest.Binary(); err != nil {
		coretest.ServerUnavailable(t, "a redis-server binary to start", "PATH or SETTLE_REDIS_SERVER", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printed := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		printed <- b
	}()
	func() {
		defer func() { os.Stdout = stdout }()
		Example()
	}()
	_ = w.Close()
	if got := string(<-printed); got != exampleOutput {
		t.Fatalf("Example printed\n%s\nwant\n%s", got, exampleOutput)
	}
}
