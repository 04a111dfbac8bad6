package coretest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// runOrdered runs an App with an ordered subscription of h on queue q of b until stop is called.
func runOrdered(t *testing.T, b *coretest.Broker, log *slog.Logger, h core.Handler[string], opts ...core.Option) (stop func()) {
	t.Helper()
	app := core.New(core.WithLogger(log), core.WithoutSignals())
	app.Register(b)
	opts = append([]core.Option{core.Ordered(), core.WithCodec(core.Raw)}, opts...)
	if err := core.Subscribe(app, b.Queue("q"), h, opts...); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// keyedPublisher returns a function that publishes a raw body with an ordering key to queue q.
func keyedPublisher(t *testing.T, b *coretest.Broker) func(body, key string) {
	pub, err := core.NewPublisher[string](b.Queue("q"), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return func(body, key string) {
		t.Helper()
		if _, err := pub.Publish(context.Background(), body, core.OrderingKey(key)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
}

// A key with a backlog of 100,000 messages takes one turn in the ready backlog at a time: the
// other keys' messages, published after it, do not wait for it. With one worker the claims are
// the handling order: the hot key's first message, then every other key's, before its second.
func TestOrderedHundredThousandBacklogDoesNotStarve(t *testing.T) {
	b := coretest.NewBroker(clock.Real(), nil)
	const hot, cold = 100_000, 100
	publishKeyed := keyedPublisher(t, b)
	for i := range hot {
		publishKeyed("hot", "hot")
		if i == hot/2 {
			publishKeyed("cold", "cold-early") // one in the middle of the backlog
		}
	}
	for i := range cold - 1 {
		publishKeyed("cold", fmt.Sprintf("cold-%d", i))
	}
	var mu sync.Mutex
	hotDone, coldDone := 0, 0
	all := make(chan int, 1)
	stop := runOrdered(t, b, slog.New(slog.DiscardHandler), func(_ context.Context, m *core.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Payload == "hot" {
			hotDone++
		} else if coldDone++; coldDone == cold {
			all <- hotDone
		}
		return nil
	}, core.Workers(1)) // one worker: the order of claims is the order of handling
	defer stop()
	select {
	case n := <-all:
		if n > 1 {
			t.Fatalf("the other keys finished after %d of the hot key's %d messages: claims do not rotate over keys", n, hot)
		}
		t.Logf("the other %d keys finished after %d of the hot key's %d messages", cold, n, hot)
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("the other keys did not finish within %v", coretest.WaitTimeout)
	}
}

// A retried head holds its key and says so in one debug line; its successor waits in the
// queue's snapshot, behind it.
func TestOrderedHeldKeyWaitIsLogged(t *testing.T) {
	b := coretest.NewBroker(clock.Real(), nil)
	var buf bytes.Buffer
	var bufMu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &bufMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	publishKeyed := keyedPublisher(t, b)
	publishKeyed("first", "cust-7")
	publishKeyed("second", "cust-7")
	var order []string
	done := make(chan struct{})
	stop := runOrdered(t, b, log, func(_ context.Context, m *core.Message[string]) error {
		order = append(order, fmt.Sprintf("%s@%d", m.Payload, m.Attempt())) // one at a time: the key is held
		switch {
		case m.Payload == "first" && m.Attempt() == 1:
			if got := len(b.Messages("q")); got != 1 {
				t.Errorf("the queue shows %d messages while the head runs, want its successor", got)
			}
			return core.Retry()
		case m.Payload == "second":
			close(done)
		}
		return nil
	}, core.Workers(4))
	<-done
	stop()
	if got := strings.Join(order, " "); got != "first@1 first@2 second@1" {
		t.Fatalf("handled %s; want first@1 first@2 second@1", got)
	}
	bufMu.Lock()
	defer bufMu.Unlock()
	for _, want := range []string{"level=DEBUG", "ordered key held", "queue=q", "ordering_key=cust-7", "message_id=1", "attempt=1", "waiting=1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
