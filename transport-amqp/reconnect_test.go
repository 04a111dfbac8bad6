package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	amqp "github.com/settlehq/settle/transport-amqp"
	"github.com/settlehq/settle/transport-amqp/amqptest"
)

// While the broker refuses connections, the consumer backs off on the App's clock (1s, then
// 2s), logging each failure, and consumes again once a dial succeeds: tested on the virtual
// clock, where the backoff passes only when the test advances it.
func TestReconnectBacksOffOnTheClock(t *testing.T) {
	v := clock.NewVirtual(coretest.Epoch)
	srv := amqptest.NewBroker(v)
	var refuse atomic.Int32
	dial := func() (amqp.Connection, error) {
		if refuse.Load() > 0 {
			refuse.Add(-1)
			return nil, errors.New("connection refused")
		}
		return srv.Dial()
	}
	logs := &coretest.Logs{}
	rec := coretest.NewRecorder(t)
	events := make(chan core.Event, 8)
	app := core.New(core.WithClock(v), core.WithLogger(slog.New(logs)), core.WithoutSignals(), core.WithObserver(rec.Observe),
		core.WithEventObserver(func(e core.Event) { events <- e }))
	b, err := amqp.New(dial, amqp.DeclareTopology(true), amqp.WithClock(v), amqp.WithLogger(app.Logger()),
		amqp.ReconnectBackoff(time.Second, 4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(b)
	ep, _ := amqp.Classic(b, "work")
	if err := core.Subscribe(app, ep, func(context.Context, *core.Message[string]) error { return nil }, rawCodec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	conn, _ := srv.Dial()
	ch, _ := conn.Channel()
	_, _ = ch.QueueDeclare("work", true, false, false, false, nil)
	publish := func(body string) {
		t.Helper()
		if err := ch.PublishWithContext(context.Background(), "", "work", false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("before")
	rec.WaitSettled(1)

	refuse.Store(2)
	srv.CloseAllConnections() // the test's own connection too
	wait, stop := context.WithTimeout(context.Background(), coretest.WaitTimeout)
	defer stop()
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		if err := v.BlockUntil(wait, 1); err != nil {
			t.Fatalf("no backoff armed on the clock: %v", err)
		}
		v.Advance(backoff)
	}
	conn, _ = srv.Dial()
	ch, _ = conn.Channel()
	publish("after")
	s := rec.WaitSettled(2)
	if string(s[1].Delivery.Body()) != "after" || s[1].Err != nil || amqp.Epoch(s[1].Delivery) != 2 {
		t.Fatalf("after the outage: %s on epoch %d: %v", s[1].Delivery.Body(), amqp.Epoch(s[1].Delivery), s[1].Err)
	}
	var backoffs []any
	for _, r := range logs.Find("amqp: reconnecting the consumer failed; backing off") {
		backoffs = append(backoffs, r.Attrs["backoff"])
	}
	if len(backoffs) != 2 || backoffs[0] != time.Second || backoffs[1] != 2*time.Second {
		t.Fatalf("backoffs logged %v, want [1s 2s]", backoffs)
	}
	again := logs.Find("amqp: consuming again")
	if len(again) != 1 || again[0].Attrs["attempts"] != int64(3) {
		t.Fatalf("recovery logged %+v", again)
	}
	// The recovery is reported to the App (a reconnects metric counts it), once.
	if len(events) != 1 {
		t.Fatalf("%d events, want one reconnection", len(events))
	}
	if e := <-events; e.Kind != core.EventReconnected || e.Subscription != "work" || e.Queue != "work" {
		t.Fatalf("event %+v", e)
	}
}
