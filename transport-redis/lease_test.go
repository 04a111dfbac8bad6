package redisq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	redisq "github.com/settlehq/settle/transport-redis"
)

// fenceLease is the lease of the fencing test.
const fenceLease = 2 * time.Second

// A delivery whose entry was claimed again by another consumer cannot settle it: its lease
// extensions leave the entry to the new owner, its ack fails with ErrLeaseLost, and the entry
// stays, pending for the consumer that claimed it.
func TestSettlementAfterReclaimIsFenced(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream := prefix + "work"
	ctx := context.Background()
	stolen := make(chan struct{})
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		id := m.Delivery().(*redisq.Delivery).EntryID()
		if err := admin.XClaim(ctx, &redis.XClaimArgs{Stream: stream, Group: "settle", Consumer: "thief",
			MinIdle: 0, Messages: []string{id}}).Err(); err != nil {
			t.Errorf("XCLAIM by another consumer: %v", err)
		}
		close(stolen)
		// The handler works on past an extension round (a third of the lease), and not so long
		// that the thief's claim ages past the lease: the extension must leave the entry to it.
		<-time.After(fenceLease / 2)
		return nil
	}, []redisq.QueueOption{redisq.Lease(fenceLease)}, raw)
	id := publish(t, url, stream, "m1", nil)
	<-stolen
	s := a.rec.WaitSettled(1)
	if !errors.Is(s[0].Err, redisq.ErrLeaseLost) {
		t.Fatalf("settlement after the entry was claimed again: err %v, want ErrLeaseLost", s[0].Err)
	}
	a.stop()
	p, err := admin.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: "settle", Start: "-", End: "+", Count: 10}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].ID != id || p[0].Consumer != "thief" || p[0].RetryCount != 2 {
		t.Fatalf("pending list %+v, want %s held by thief, delivered twice", p, id)
	}
	if n := admin.XLen(ctx, stream).Val(); n != 1 {
		t.Fatalf("stream holds %d entries, want the claimed one still", n)
	}
}

// An entry read by a consumer that stopped without settling it (a crash) is claimed again once
// its lease has run out, as a suspect delivery with the attempt raised.
func TestAbandonedEntryClaimedAfterLease(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream := prefix + "work"
	ctx := context.Background()
	if err := admin.XGroupCreateMkStream(ctx, stream, "settle", "0").Err(); err != nil {
		t.Fatal(err)
	}
	publish(t, url, stream, "m1", nil)
	if err := admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "settle", Consumer: "crashed",
		Streams: []string{stream, ">"}, Count: 1}).Err(); err != nil {
		t.Fatalf("read as the consumer that crashes: %v", err)
	}
	type seen struct {
		attempt int
		suspect bool
	}
	got := make(chan seen, 1)
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		got <- seen{m.Attempt(), m.Delivery().(*redisq.Delivery).Suspect()}
		return nil
	}, []redisq.QueueOption{redisq.Lease(200 * time.Millisecond)}, raw)
	s := a.rec.WaitSettled(1)
	if s[0].Err != nil || s[0].Verdict.Action != core.ActAck {
		t.Fatalf("settlement %v: %v", s[0].Verdict, s[0].Err)
	}
	if g := <-got; g.attempt != 2 || !g.suspect {
		t.Fatalf("claimed again as attempt %d (suspect %v), want attempt 2, suspect", g.attempt, g.suspect)
	}
	if n := admin.XLen(ctx, stream).Val(); n != 0 {
		t.Fatalf("stream holds %d entries after the ack", n)
	}
}

// A handler that works for several leases keeps its entry: the subscription extends the lease,
// and another consumer of the group, claiming what has been idle for a lease, never gets it.
func TestLeaseExtendedWhileHandlerWorks(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream := prefix + "work"
	const lease = 300 * time.Millisecond
	qopts := []redisq.QueueOption{redisq.Lease(lease)}
	entered := make(chan struct{})
	a := run(t, url, stream, func(context.Context, *core.Message[string]) error {
		close(entered)
		<-time.After(5 * lease) // the handler's work outlasts its lease several times
		return nil
	}, qopts, raw)
	publish(t, url, stream, "m1", nil)
	<-entered
	b := run(t, url, stream, func(context.Context, *core.Message[string]) error { return nil }, qopts, raw)
	s := a.rec.WaitSettled(1)
	if s[0].Err != nil {
		t.Fatalf("the slow handler's ack failed: %v", s[0].Err)
	}
	b.stop()
	if n := len(b.rec.Settlements()); n != 0 {
		t.Fatalf("the other consumer handled %d deliveries of a leased entry", n)
	}
	if n := admin.XLen(context.Background(), stream).Val(); n != 0 {
		t.Fatalf("stream holds %d entries after the ack", n)
	}
}

// A retry after a delay leaves the entry in the delay set, in Redis, not in the process: a
// service stopped before the delay ran out finds it again after a restart.
func TestDelaySurvivesServiceRestart(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream := prefix + "work"
	ctx := context.Background()
	a := run(t, url, stream, func(context.Context, *core.Message[string]) error {
		return core.RetryAfter(time.Hour)
	}, nil, raw)
	publish(t, url, stream, "m1", map[string]string{"tenant": "acme"})
	a.rec.WaitSettled(1)
	a.stop()
	if n := admin.ZCard(ctx, stream+redisq.DelayedSuffix).Val(); n != 1 {
		t.Fatalf("delay set holds %d entries, want 1", n)
	}
	if n := admin.XLen(ctx, stream).Val(); n != 0 {
		t.Fatalf("stream holds %d entries while the delay runs", n)
	}
	// Bring the due time forward, as the hour passing would.
	members := admin.ZRange(ctx, stream+redisq.DelayedSuffix, 0, -1).Val()
	admin.ZAdd(ctx, stream+redisq.DelayedSuffix, redis.Z{Score: 0, Member: members[0]})
	type seen struct {
		attempt int
		tenant  string
	}
	got := make(chan seen, 1)
	b := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		got <- seen{m.Attempt(), m.Headers()["tenant"]}
		return nil
	}, nil, raw)
	b.rec.WaitSettled(1)
	if g := <-got; g.attempt != 2 || g.tenant != "acme" {
		t.Fatalf("delayed entry came back as attempt %d with tenant %q, want 2 and acme", g.attempt, g.tenant)
	}
}
