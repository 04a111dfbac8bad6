package natsjs_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// forgetful is an embedded nats-server that can be restarted from an earlier copy of its store:
// the way a SIGKILLed nats-server comes back having forgotten the deliveries it made in its last
// ~100 ms (it writes consumer state from a background flusher), made deterministic. The copy is
// taken with the server stopped in an orderly way, after the message was stored and before it
// was delivered.
type forgetful struct {
	t    *testing.T
	port int
	dir  string
	s    *natsserver.Server
}

func newForgetful(t *testing.T) *forgetful {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	f := &forgetful{t: t, port: port, dir: t.TempDir()}
	f.s = ownServer(t, port, f.dir)
	t.Cleanup(func() { f.s.Shutdown() })
	return f
}

func (f *forgetful) url() string { return f.s.ClientURL() }

// snapshot stops the server, copies its store, and starts it again on the original.
func (f *forgetful) snapshot() string {
	f.s.Shutdown()
	f.s.WaitForShutdown()
	snap := filepath.Join(f.t.TempDir(), "snap")
	if err := os.CopyFS(snap, os.DirFS(f.dir)); err != nil {
		f.t.Fatal(err)
	}
	f.s = ownServer(f.t, f.port, f.dir)
	return snap
}

// restartFrom stops the server and starts it on the same port from the store at dir.
func (f *forgetful) restartFrom(dir string) {
	f.s.Shutdown()
	f.s.WaitForShutdown()
	f.dir = dir
	f.s = ownServer(f.t, f.port, dir)
}

// The server delivers a message again while a worker still handles its first delivery — it forgot
// that delivery in a crash, here replayed by restarting it from a store copied before the
// delivery. The second delivery is not handed to the second free worker: the handler runs once at
// a time, and the first delivery's outcome settles the message once — an ack, a drop or a dead
// letter (its copy stored once) end it, a retry brings it back to be handled again afterwards.
func TestForgottenDeliveryHandledOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome error
		runs    int // handler runs in all
		action  core.Action
	}{
		{"ack", nil, 1, core.ActAck},
		{"drop", core.Drop(), 1, core.ActDrop},
		{"retry", core.Retry(), 2, core.ActRetry},
		{"retry after", core.RetryAfter(50 * time.Millisecond), 2, core.ActRetryAfter},
		{"dead letter", core.Retry(), 1, core.ActDeadLetter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newForgetful(t)
			dead := tc.action == core.ActDeadLetter
			var runs, active, overlap atomic.Int32
			started, release := make(chan struct{}, 1), make(chan struct{})
			r := newRig(t, f.url(), clock.Real(), natsjs.DeclareTopology(true))
			opts := []core.Option{core.WithCodec(core.Raw), core.Workers(2)}
			if dead {
				opts = append(opts, core.DeadLetterAfter(1, r.subject("dead")))
			}
			err := core.Subscribe(r.app, r.queue("work"), func(ctx context.Context, m *core.Message[string]) error {
				if active.Add(1) > 1 {
					overlap.Add(1)
				}
				defer active.Add(-1)
				if runs.Add(1) == 1 {
					started <- struct{}{}
					<-release
					return tc.outcome
				}
				return nil
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			declareOnly(t, f, r, opts[1:]...)
			r.publish("work", "once", nil)
			snap := f.snapshot() // stored, not delivered
			r.mustStart()
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // before the App stops, when the test fails early
			<-started
			f.restartFrom(snap) // the server forgets the delivery in hand and makes it again
			waitDuplicate(t, r, &runs)
			free()
			all := r.rec.WaitSettled(tc.runs)
			r.stop()
			if n := runs.Load(); n != int32(tc.runs) {
				t.Errorf("handler ran %d times; want %d", n, tc.runs)
			}
			if n := overlap.Load(); n > 0 {
				t.Errorf("the handler ran %d times beside another run of the same message", n)
			}
			if len(all) != tc.runs || all[0].Verdict.Action != tc.action || all[0].Err != nil {
				t.Fatalf("settlements %v; want %d, the first %v without error", describeAll(all), tc.runs, tc.action)
			}
			if tc.runs == 2 && (all[1].Verdict.Action != core.ActAck || all[1].Delivery.Attempt() != 2) {
				t.Errorf("second settlement %v of attempt %d; want the redelivery (attempt 2) acked", all[1].Verdict, all[1].Delivery.Attempt())
			}
			ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
			defer cancel()
			admin := newAdmin(t, f.url())
			if si, err := admin.js.Stream(ctx, r.stream("work")); err != nil || si.CachedInfo().State.Msgs != 0 {
				t.Errorf("work stream after the drain: %v, err %v; want empty", si, err)
			}
			if dead {
				si, err := admin.js.Stream(ctx, r.stream("dead"))
				if err != nil {
					t.Fatal(err)
				}
				if n := si.CachedInfo().State.Msgs; n != 1 {
					t.Errorf("dead-letter stream holds %d copies; want 1", n)
				}
			}
		})
	}
}

// An ack of a delivery the server forgot gets no answer. The worker goes on meanwhile (its
// confirmation waits on its own), fetches, receives the server's new delivery of the message,
// sends the ack again on it and has it answered: the settlement is confirmed without waiting out
// RequestTimeout (20s here; the worker used to wait for it, then the message ran again).
func TestAckOfForgottenDeliveryConfirmedByRedelivery(t *testing.T) {
	f := newForgetful(t)
	var runs atomic.Int32
	started, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, f.url(), clock.Real(), natsjs.DeclareTopology(true), natsjs.RequestTimeout(20*time.Second))
	err := core.Subscribe(r.app, r.queue("work"), func(ctx context.Context, m *core.Message[string]) error {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}, core.WithCodec(core.Raw), core.Workers(1)) // no fetch in flight while the handler runs
	if err != nil {
		t.Fatal(err)
	}
	declareOnly(t, f, r)
	r.publish("work", "once", nil)
	snap := f.snapshot()
	r.mustStart()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	<-started
	f.restartFrom(snap)
	waitConnected(t, r, f)
	free() // the ack goes to a server that forgot the delivery
	all := r.rec.WaitSettled(1)
	if all[0].Err != nil || all[0].Verdict.Action != core.ActAck {
		t.Fatalf("settlement %v; want the ack confirmed", describeAll(all))
	}
	r.stop()
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times; want 1", n)
	}
	if n := len(r.rec.Settlements()); n != 1 {
		t.Errorf("%d settlements; want 1", n)
	}
}

// declareOnly declares the rig's topology on f's server with a subscription of its own, which
// handles nothing: the rig's App starts later, on a server that has the message stored.
func declareOnly(t *testing.T, f *forgetful, r *rig, opts ...core.Option) {
	t.Helper()
	c, err := natsjs.New(f.url(), natsjs.DeclareTopology(true), natsjs.WithLogger(logTo(&coretest.Logs{})))
	if err != nil {
		t.Fatal(err)
	}
	app := core.New(core.WithLogger(logTo(&coretest.Logs{})), core.WithoutSignals())
	app.Register(c)
	q, err := natsjs.NewQueue(c, r.subject("work"))
	if err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(app, q, func(context.Context, *core.Message[string]) error { return nil },
		append([]core.Option{core.WithCodec(core.Raw)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	select {
	case <-app.Ready():
	case err := <-done:
		t.Fatalf("declaring: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitDuplicate waits until the subscription has logged the second delivery it did not hand out;
// a second run of the handler meanwhile fails the test at once.
func waitDuplicate(t *testing.T, r *rig, runs *atomic.Int32) {
	t.Helper()
	deadline := time.Now().Add(coretest.WaitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if runs.Load() > 1 {
			t.Fatal("the message delivered again was handed to a second worker while the first still handled it")
		}
		if len(r.logs.Find("nats: a message was delivered again while this subscription still has it in hand (the server forgot the first delivery, e.g. in a crash); not handed out, it is settled once with the first delivery's outcome")) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's second delivery not seen within %v", coretest.WaitTimeout)
		}
		<-tick.C
	}
}

// waitConnected waits until the rig's connection is up again, on f's current server.
func waitConnected(t *testing.T, r *rig, f *forgetful) {
	t.Helper()
	nc, err := r.conn.NATS()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(coretest.WaitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !nc.IsConnected() || nc.ConnectedServerId() != f.s.ID() {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected within %v", coretest.WaitTimeout)
		}
		<-tick.C
	}
}

func describeAll(all []core.Settlement) []string {
	var s []string
	for _, x := range all {
		s = append(s, fmt.Sprintf("%v attempt %d: %v", x.Verdict, x.Delivery.Attempt(), x.Err))
	}
	return s
}
