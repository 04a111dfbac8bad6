package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	redisq "github.com/settlehq/settle/transport-redis"
)

// The client's health follows its server: pass while it answers, fail once it is killed, and
// fail (closed) after Close.
func TestClientHealth(t *testing.T) {
	srv := startOwnRedis(t, "always")
	c, err := redisq.Open(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	check := func() core.ComponentHealth {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return c.CheckHealth(ctx)
	}
	if h := check(); h.Status != core.HealthPass || h.State != "connected" {
		t.Fatalf("health with the server up: %+v", h)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if h := check(); h.Status != core.HealthFail || h.State != "unreachable" || h.Output == "" {
		t.Fatalf("health with the server killed: %+v", h)
	}
	_ = c.Close()
	if h := check(); h.Status != core.HealthFail || h.State != "closed" {
		t.Fatalf("health after Close: %+v", h)
	}
}

// A retried message is a new entry, but it keeps its id and the time it was first added.
func TestRetryKeepsIDAndEnqueuedTime(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	newAdmin(t, url, prefix)
	stream := prefix + "work"
	type seen struct {
		id, entry string
		at        time.Time
		ok        bool
		system    string
	}
	got := make(chan seen, 2)
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		d := m.Delivery().(*redisq.Delivery)
		at, ok := d.EnqueuedAt()
		got <- seen{d.ID(), d.EntryID(), at, ok, d.MessagingSystem()}
		if m.Attempt() == 1 {
			return core.Retry()
		}
		return nil
	}, nil, raw)
	id := publish(t, url, stream, "m1", nil)
	a.rec.WaitSettled(2)
	first, second := <-got, <-got
	if first.id != id || second.id != id || second.entry == id {
		t.Fatalf("ids %q then %q (entry %q), want %q on both, the second from a new entry", first.id, second.id, second.entry, id)
	}
	if !first.ok || !second.ok || !second.at.Equal(first.at) || first.system != "redis" {
		t.Fatalf("enqueued at %v (%v) then %v (%v), system %q; want the first entry's time on both, redis", first.at, first.ok, second.at, second.ok, first.system)
	}
}
