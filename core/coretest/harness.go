package coretest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Epoch is the time a Harness's virtual clock starts at.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// WaitTimeout bounds every wait of the harness in real time; a wait that runs out fails the
// test (the reaction never came), it never passes it.
var WaitTimeout = 10 * time.Second

// Harness runs an App in process on a virtual clock and the in-memory Broker, and records every
// settlement so a test can wait for reactions and assert what happened:
//
//	h := coretest.New(t)
//	coretest.Subscribe(h, "refunds", handle, core.DeadLetterAfter(3, "refunds.dead"))
//	h.Start()
//	id := h.Publish("refunds", Refund{Card: "busy"})
//	h.WaitSettled(1)
//	h.Advance(30 * time.Second) // releases the RetryAfter(30s) copy
//	h.WaitSettled(2)
type Harness struct {
	T      testing.TB
	Clock  *clock.Virtual
	Broker *Broker
	App    *core.App
	Logs   *Logs
	*Recorder
	// LeakCheck, when set before Start, checks after Stop that the App left no goroutines
	// running (see LeakCheck).
	LeakCheck LeakCheck

	cancel context.CancelFunc
	done   chan error
	leaks  func()
}

// New returns a Harness; opts are added to the App's options (after the harness's own clock,
// logger and observer).
func New(t testing.TB, opts ...core.AppOption) *Harness {
	h := &Harness{T: t, Clock: clock.NewVirtual(Epoch), Logs: &Logs{}, Recorder: NewRecorder(t)}
	logger := slog.New(h.Logs)
	h.Broker = NewBroker(h.Clock, logger)
	all := append([]core.AppOption{
		core.WithClock(h.Clock), core.WithLogger(logger), core.WithoutSignals(),
		core.WithObserver(h.Observe), core.WithShutdownTimeout(time.Minute),
	}, opts...)
	h.App = core.New(all...)
	h.App.Register(h.Broker)
	return h
}

// Subscribe mounts handler on the in-memory queue; it fails the test on a construction error.
func Subscribe[T any](h *Harness, queue string, handler core.Handler[T], opts ...core.Option) {
	h.T.Helper()
	if err := core.Subscribe(h.App, h.Broker.Queue(queue), handler, opts...); err != nil {
		h.T.Fatalf("coretest.Subscribe(%q): %v", queue, err)
	}
}

// SubscribeBatch mounts the batch handler on the in-memory queue; it fails the test on a
// construction error.
func SubscribeBatch[T any](h *Harness, queue string, handler core.BatchHandler[T], opts ...core.Option) {
	h.T.Helper()
	if err := core.SubscribeBatch(h.App, h.Broker.Queue(queue), handler, opts...); err != nil {
		h.T.Fatalf("coretest.SubscribeBatch(%q): %v", queue, err)
	}
}

// Start runs the App in the background; the test's cleanup stops it.
func (h *Harness) Start() {
	h.T.Helper()
	h.leaks = h.LeakCheck.Check(h.T)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.App.Run(ctx) }()
	h.T.Cleanup(h.Stop)
	select {
	case <-h.App.Ready():
	case err := <-h.done:
		h.T.Fatalf("App.Run: %v", err)
	case <-time.After(WaitTimeout):
		h.T.Fatalf("App not ready within %v", WaitTimeout)
	}
}

// Stop stops the App and waits for Run to return; it returns Run's error.
func (h *Harness) Stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.T.Errorf("App.Run: %v", err)
		}
		h.leaks()
	case <-time.After(WaitTimeout):
		h.T.Errorf("App.Run did not return within %v of stopping", WaitTimeout)
	}
}

// Publish JSON-encodes v onto queue and returns the message id.
func (h *Harness) Publish(queue string, v any) string {
	h.T.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		h.T.Fatalf("coretest.Publish: %v", err)
	}
	return h.Broker.Publish(queue, body, nil)
}

// PublishRaw puts body and headers onto queue as they are and returns the message id.
func (h *Harness) PublishRaw(queue string, body []byte, headers map[string]string) string {
	return h.Broker.Publish(queue, body, headers)
}

// Advance moves the virtual clock forward by d, releasing what falls due.
func (h *Harness) Advance(d time.Duration) { h.Clock.Advance(d) }

// DeadLetters returns what the dead-letter queue dest holds, with each message's final attempt.
func (h *Harness) DeadLetters(dest string) []Stored { return h.Broker.Messages(dest) }
