package natsjs_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// plan is what the handler does with one message of the cluster drain, decided by a seeded
// random draw: the final outcome is known in advance, whatever the attempt it lands on.
type plan uint8

const (
	planAck        plan = iota // ack at once
	planDrop                   // drop at once
	planRetryOnce              // retry, then ack
	planDelayOnce              // retry after 20ms, then ack
	planAlwaysFail             // retry until the cap moves it to the dead letter
)

// ledger is the cluster drain's account of effects: a handler applies a message's final effect
// (ack or drop) once; a delivery of a message whose effect was applied already is a duplicate,
// handled by acknowledging it again without applying anything.
type ledger struct {
	mu         sync.Mutex
	applied    map[string]plan
	duplicates int
	finals     atomic.Int64
	reached    chan struct{} // closed when finals reaches want
	want       int64
	settled    map[string]int // successful final settlements (ack, drop, dead letter) per id
	failed     atomic.Int64   // settlements that reported an error
}

func (l *ledger) apply(id string, p plan) (duplicate bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, done := l.applied[id]; done {
		l.duplicates++
		return true
	}
	l.applied[id] = p
	if l.finals.Add(1) == l.want {
		close(l.reached)
	}
	return false
}

func (l *ledger) observe(s core.Settlement) {
	if s.Err != nil {
		l.failed.Add(1)
		return
	}
	switch s.Verdict.Action {
	case core.ActAck, core.ActDrop, core.ActDeadLetter:
		l.mu.Lock()
		l.settled[s.Delivery.ID()]++
		l.mu.Unlock()
	}
}

// TestClusterLeaderLossMidDrain drains 20,000 messages with seeded random outcomes from a stream
// with three replicas on a three-node cluster, and shuts the stream's leader down a quarter of
// the way through. The service goes on through the survivors (its connection knows every URL),
// and the ledger shows every message ended exactly where its plan says, each effect applied
// once, each dead letter stored once.
func TestClusterLeaderLossMidDrain(t *testing.T) {
	const (
		total     = 20000
		capN      = 3
		workers   = 64
		killAt    = total / 4
		seed      = 19
		timeBound = 150 * time.Second // about 25s under -race on a quiet machine; a loaded one takes three times that
	)
	started := time.Now()
	cl := natstest.NewCluster(t, []int{4240, 4241, 4242}, []int{6240, 6241, 6242})

	rng := rand.New(rand.NewPCG(seed, seed))
	plans := make(map[string]plan, total)
	want := map[plan]int{}
	for i := range total {
		var p plan
		switch x := rng.IntN(100); {
		case x < 70:
			p = planAck
		case x < 78:
			p = planDrop
		case x < 88:
			p = planRetryOnce
		case x < 93:
			p = planDelayOnce
		default:
			p = planAlwaysFail
		}
		plans["m-"+strconv.Itoa(i)] = p
		want[p]++
	}
	finalInHandler := int64(total - want[planAlwaysFail])
	l := &ledger{applied: map[string]plan{}, settled: map[string]int{}, reached: make(chan struct{}), want: finalInHandler}

	logs := &coretest.Logs{}
	app := core.New(core.WithLogger(logTo(logs)), core.WithoutSignals(), core.WithObserver(l.observe), core.WithShutdownTimeout(10*time.Second))
	conn, err := natsjs.New(cl.URLs(), natsjs.DeclareTopology(true), natsjs.WithLogger(logTo(logs)),
		natsjs.RequestTimeout(2*time.Second), natsjs.DeadLetterBackoff(50*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	app.Register(conn)
	q, err := natsjs.NewQueue(conn, "cluster.work", natsjs.Replicas(3), natsjs.AckWait(5*time.Second), natsjs.FetchWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	handle := func(_ context.Context, m *core.Message[string]) error {
		id := m.ID()
		p, ok := plans[id]
		if !ok {
			return core.Drop().Because(fmt.Errorf("unknown message %q", id))
		}
		switch {
		case p == planAlwaysFail:
			return core.Retry().Because(fmt.Errorf("%s always fails", id))
		case p == planRetryOnce && m.Attempt() == 1:
			return core.Retry()
		case p == planDelayOnce && m.Attempt() == 1:
			return core.RetryAfter(20 * time.Millisecond)
		}
		l.apply(id, p)
		if p == planDrop {
			return core.Drop()
		}
		return nil
	}
	if err := core.Subscribe(app, q, handle, raw, core.Workers(workers), core.DeadLetterAfter(capN, "cluster.dead")); err != nil {
		t.Fatal(err)
	}

	// Declare first, then publish everything, then start draining.
	ctx, cancel := context.WithTimeout(context.Background(), timeBound)
	defer cancel()
	nc, err := nats.Connect(cl.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(runCtx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		t.Fatalf("App.Run: %v", err)
	case <-ctx.Done():
		t.Fatal("App not ready")
	}
	defer func() { stop(); <-ran }()

	// Publishing races the drain; that is fine, the plans do not depend on order.
	for i := range total {
		id := "m-" + strconv.Itoa(i)
		if _, err := js.PublishAsync("cluster.work", []byte(id), jetstream.WithMsgID(id), jetstream.WithStallWait(10*time.Second)); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatalf("publishing did not complete: %d pending", js.PublishAsyncPending())
	}
	published := time.Since(started)

	// A quarter through, the stream's leader goes.
	tick := time.NewTicker(10 * time.Millisecond)
	for l.finals.Load() < killAt {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("only %d of %d effects before the deadline", l.finals.Load(), killAt)
		}
	}
	tick.Stop()
	leader := cl.StreamLeader("cluster_work")
	if leader == nil {
		t.Fatal("stream cluster_work has no leader")
	}
	killedAt := l.finals.Load()
	leader.Shutdown()
	t.Logf("shut down stream leader %s after %d effects", leader.Name(), killedAt)
	if _, err := cl.WaitStreamLeader(ctx, "cluster_work"); err != nil {
		t.Fatal(err)
	}

	select {
	case <-l.reached:
	case <-ctx.Done():
		t.Fatalf("drain incomplete after %v: %d of %d effects", timeBound, l.finals.Load(), finalInHandler)
	}
	dead := waitDeadLetters(ctx, t, js, "cluster_dead", want[planAlwaysFail])
	drained := time.Since(started)
	// An ack the old leader confirmed but never replicated leaves its message in the work
	// stream: the new leader delivers it again when its AckWait runs out, the handler sees a
	// duplicate, and its ack empties the stream. The service runs until then (bounded: a few
	// AckWaits), so a message still left afterwards is one the cluster kept and never
	// delivered again.
	left := waitWorkStreamEmpty(ctx, js, "cluster_work", 4*5*time.Second)
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("App.Run: %v", err)
	}
	ran <- nil

	// The ledger.
	lost, wrong := 0, 0
	for id, p := range plans {
		if p == planAlwaysFail {
			if dead[id] != 1 {
				lost++
				t.Errorf("%s: %d copies in the dead letter; want 1", id, dead[id])
			}
			if _, ok := l.applied[id]; ok {
				wrong++
				t.Errorf("%s: meant for the dead letter, but its effect was applied", id)
			}
			continue
		}
		got, ok := l.applied[id]
		switch {
		case !ok:
			lost++
			t.Errorf("%s (plan %d): never applied", id, p)
		case got != p:
			wrong++
		}
		if dead[id] != 0 {
			wrong++
			t.Errorf("%s: applied and also dead-lettered", id)
		}
	}
	settledTwice := 0
	for _, n := range l.settled {
		if n > 1 {
			settledTwice++
		}
	}
	t.Logf("cluster ledger: published %d in %v, drained in %v; acked %d, dropped %d, dead-lettered %d (each stored once), lost %d, wrong outcome %d, effects applied twice 0; duplicates handled %d (a message delivered again after its effect was applied: its final settlement was lost with the leader), dead letters moved again %d (stored once: the destination dropped the copy by its message id), settlements that failed %d (the message came back), ids settled more than once %d; left in the work stream %d; the service's connection reconnected %d times and %d fetches failed over the leader change",
		total, published.Round(time.Millisecond), drained.Round(time.Millisecond),
		want[planAck]+want[planRetryOnce]+want[planDelayOnce], want[planDrop], len(dead), lost, wrong,
		l.duplicates, countDeadDuplicates(l, plans), l.failed.Load(), settledTwice, left,
		len(logs.Find("nats: reconnected")), len(logs.Find("settle: taking the next delivery failed; trying again")))
	if lost != 0 || wrong != 0 {
		t.Fatalf("ledger: %d lost, %d wrong", lost, wrong)
	}
	if left != 0 {
		t.Errorf("%d messages left in the work stream after the drain and four AckWaits of redelivery", left)
	}
}

// countDeadDuplicates counts dead-lettered ids settled more than once (a dead letter published
// again is dropped by the destination's duplicate window, so it is stored once all the same).
func countDeadDuplicates(l *ledger, plans map[string]plan) int {
	n := 0
	for id, c := range l.settled {
		if c > 1 && plans[id] == planAlwaysFail {
			n++
		}
	}
	return n
}

// waitWorkStreamEmpty waits up to bound for stream to hold no message and returns how many it
// still holds.
func waitWorkStreamEmpty(ctx context.Context, js jetstream.JetStream, stream string, bound time.Duration) uint64 {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	left := uint64(math.MaxUint64)
	for {
		if s, err := js.Stream(ctx, stream); err == nil {
			if left = s.CachedInfo().State.Msgs; left == 0 {
				return 0
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return left
		}
	}
}

// waitDeadLetters waits until stream holds n messages and returns how often each body occurs.
func waitDeadLetters(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, n int) map[string]int {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil && s.CachedInfo().State.Msgs >= uint64(n) {
			out := map[string]int{}
			st := s.CachedInfo().State
			for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if err != nil {
					t.Fatalf("dead letter %d: %v", seq, err)
				}
				out[string(m.Data)]++
			}
			return out
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("dead-letter stream %s: %v (want %d messages)", stream, err, n)
		}
	}
}
