package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	redisq "github.com/settlehq/settle/transport-redis"
)

// running is one App of a test on one stream, with its settlements recorded.
type running struct {
	rec    *coretest.Recorder
	client *redisq.Client
	stop   func()
}

// run starts an App with handler on stream at url and stops it when the test ends.
func run[T any](t *testing.T, url, stream string, h core.Handler[T], qopts []redisq.QueueOption, opts ...core.Option) *running {
	t.Helper()
	rec := coretest.NewRecorder(t)
	app := core.New(core.WithLogger(testLogger()), core.WithoutSignals(), core.WithObserver(rec.Observe),
		core.WithShutdownTimeout(2*time.Second))
	c, err := redisq.Open(url, redisq.WithLogger(testLogger()))
	if err != nil {
		t.Fatalf("redisq.Open: %v", err)
	}
	app.Register(c)
	q, err := redisq.NewQueue(c, stream, qopts...)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	if err := core.Subscribe(app, q, h, opts...); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-done:
		t.Fatalf("App.Run: %v", err)
	case <-time.After(coretest.WaitTimeout):
		t.Fatalf("App not ready within %v", coretest.WaitTimeout)
	}
	r := &running{rec: rec, client: c}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("App.Run: %v", err)
			}
		case <-time.After(coretest.WaitTimeout):
			t.Errorf("App.Run did not return after stop")
		}
	}
	t.Cleanup(r.stop)
	return r
}

// publish adds body to stream through core's publish API and returns its receipt's id.
func publish(t *testing.T, url, stream, body string, headers map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer cancel()
	id, err := publishRaw(ctx, url, stream, []byte(body), headers)
	if err != nil {
		t.Fatalf("publish to %s: %v", stream, err)
	}
	return id
}

func publishRaw(ctx context.Context, url, stream string, body []byte, headers map[string]string, opts ...redisq.Option) (string, error) {
	c, err := redisq.Open(url, opts...)
	if err != nil {
		return "", err
	}
	defer c.Close()
	q, err := redisq.NewQueue(c, stream)
	if err != nil {
		return "", err
	}
	pub, err := core.NewPublisher[[]byte](q, core.PublishCodec(core.Raw))
	if err != nil {
		return "", err
	}
	var popts []core.PublishOption
	if len(headers) > 0 {
		popts = append(popts, core.Headers(headers))
	}
	r, err := pub.Publish(ctx, body, popts...)
	return r.ID, err
}

var raw = core.WithCodec(core.Raw)
