package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// ownServer starts an embedded nats-server with JetStream on port, storing in dir.
func ownServer(t *testing.T, port int, dir string) *natsserver.Server {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{ServerName: "settle-restart", Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10s")
	}
	return s
}

// freePort returns a loopback port nothing listens on, for a server the test restarts.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proxied starts an embedded nats-server with JetStream on port, storing in dir, and a proxy
// in front of it on the first free port of ports; it returns the server, its own URL and the
// proxy. The server is shut down after the test's later cleanups (its App's stop) have run.
func proxied(t *testing.T, port int, dir string, ports ...int) (*natsserver.Server, string, *coretest.Proxy) {
	t.Helper()
	s := ownServer(t, port, dir)
	t.Cleanup(s.Shutdown)
	url := s.ClientURL()
	return s, url, coretest.NewProxy(t, url[len("nats://"):], ports...)
}

// waitStored waits until the stream holds a message.
func waitStored(ctx context.Context, t *testing.T, a *admin, stream string) {
	t.Helper()
	for {
		st, err := a.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().State.Msgs > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nothing stored on %s", stream)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// restarting is a subscription (FetchWait 20 s, a handler that acknowledges) on an embedded
// server reached through a proxy, with one message settled; the test cuts the proxy and
// restarts the server.
type restarting struct {
	s        *natsserver.Server
	port     int
	dir, url string // the server's store and its own URL
	p        *coretest.Proxy
	r        *rig
}

func newRestarting(t *testing.T, ports ...int) *restarting {
	t.Helper()
	x := &restarting{port: freePort(t), dir: t.TempDir()}
	x.s, x.url, x.p = proxied(t, x.port, x.dir, ports...)
	t.Cleanup(func() { x.s.Shutdown() }) // the server restart started
	x.r = newRig(t, "nats://"+x.p.Addr(), clock.Real(), natsjs.DeclareTopology(true))
	if err := core.Subscribe(x.r.app, x.r.queue("work", natsjs.FetchWait(20*time.Second)), func(context.Context, *core.Message[string]) error { return nil },
		core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	x.r.mustStart()
	x.r.publish("work", "before", nil)
	x.r.rec.WaitSettled(1)
	return x
}

// restart stops the server and starts it again on its port and store.
func (x *restarting) restart(t *testing.T) {
	t.Helper()
	x.s.Shutdown()
	x.s.WaitForShutdown()
	x.s = ownServer(t, x.port, x.dir)
}

// After the server restarts, the subscription settles again as soon as it has reconnected. A
// server that stops in an orderly way tells the pull requests it holds; one that crashes (here:
// the connection cut at a proxy of the test's own, ports 4300-4309, before the server stops)
// does not, and the new server never heard of them: the client used to wait for its request to
// expire (FetchWait, 20s here) before fetching again. Reconnected to a server with another id, it
// now ends that fetch and sends a new request at once.
func TestRestartedServerServesAtOnce(t *testing.T) {
	x := newRestarting(t, 4300, 4301, 4302, 4303, 4304, 4305, 4306, 4307, 4308, 4309)
	r := x.r
	// The server holds the subscription's next pull request.
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	for {
		c, err := r.admin.js.Consumer(ctx, r.stream("work"), r.stream("work"))
		if err != nil {
			t.Fatal(err)
		}
		if c.CachedInfo().NumWaiting > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no pull request waiting on the server")
		case <-time.After(10 * time.Millisecond):
		}
	}
	x.p.Cut() // the client hears nothing more from this server
	x.restart(t)
	x.p.Restore()
	back := time.Now()
	if _, err := newAdmin(t, x.url).js.Publish(ctx, r.subject("work"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	r.rec.WaitSettled(2)
	d := time.Since(back)
	t.Logf("first settlement %v after the server was back", d)
	if d > time.Second {
		t.Fatalf("first settlement %v after the server was back; want within 1s (reconnect wait 250ms)", d)
	}
}

// A pull request the restarted server loses (one it took while its consumer was still
// loading, one flushed from the client's buffer as it came back) holds the subscription only
// briefly: for a while after the connection came back, every request expires on the server
// within half a second, where this subscription's FetchWait is 20 s. The test reads the requests
// off the new server's pull subject.
func TestPullRequestsShortAfterRestart(t *testing.T) {
	x := newRestarting(t, 4320, 4321, 4322, 4323, 4324, 4325, 4326, 4327, 4328, 4329)
	r := x.r
	x.p.Cut()
	x.restart(t)
	a := newAdmin(t, x.url)
	pulls := a.pulls(t, r.stream("work"), r.stream("work"))
	x.p.Restore()
	// An idle subscription asks again as each request expires: three in a row, each short.
	for i := range 3 {
		q, ok := nextPullRequest(t, pulls, coretest.WaitTimeout)
		if !ok {
			t.Fatalf("%d pull requests within %v of the restart; want 3 (an idle subscription asks again every 500ms)", i, coretest.WaitTimeout)
		}
		if w := time.Duration(q.Expires); w <= 0 || w > 500*time.Millisecond {
			t.Fatalf("pull request %d after the restart waits %v on the server (batch %d); want at most 500ms", i+1, w, q.Batch)
		}
	}
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	if _, err := a.js.Publish(ctx, r.subject("work"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	r.rec.WaitSettled(2)
}

// While a restarted server has not loaded JetStream yet, the subscription's fetches fail; they
// are retried every 100 ms, not with the subscription's doubling backoff, so the first
// settlement comes as soon as JetStream is back. Here the server comes back first without
// JetStream (every fetch fails), and once a dozen fetches have failed, with it: before, those
// failures had doubled core's backoff to seconds (and a dozen took far longer than the test
// waits); now the first settlement follows JetStream within a second.
func TestFetchesRetriedWhileJetStreamLoads(t *testing.T) {
	port, dir := freePort(t), t.TempDir()
	s := ownServer(t, port, dir)
	t.Cleanup(func() { s.Shutdown() })
	r := newRig(t, s.ClientURL(), clock.Real(), natsjs.DeclareTopology(true))
	if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return nil },
		core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	r.publish("work", "before", nil)
	r.rec.WaitSettled(1)

	s.Shutdown()
	s.WaitForShutdown()
	bare, err := natsserver.NewServer(&natsserver.Options{ServerName: "settle-restart", Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go bare.Start()
	if !bare.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server without JetStream not ready within 10s")
	}
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	failed := func() int {
		return len(r.logs.Find("nats: fetching after a reconnection failed; trying again")) +
			len(r.logs.Find("settle: taking the next delivery failed; trying again"))
	}
	for failed() < 12 {
		select {
		case <-ctx.Done():
			bare.Shutdown()
			t.Fatalf("%d fetches failed while JetStream was away; want 12 within %v", failed(), coretest.WaitTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	bare.Shutdown()
	bare.WaitForShutdown()
	s = ownServer(t, port, dir)
	if _, err := newAdmin(t, s.ClientURL()).js.Publish(ctx, r.subject("work"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	r.rec.WaitSettled(2)
	if d := time.Since(back); d > time.Second {
		t.Fatalf("first settlement %v after JetStream was back; want within 1s", d)
	} else {
		t.Logf("first settlement %v after JetStream was back", d)
	}
}

// A dead letter's copy whose publish acknowledgement is awaited when the connection drops stops
// waiting at the drop: the answer will not come (a crashed server, a cut connection), and the
// worker used to wait out RequestTimeout (5 s by default) — with every other handler of the
// subscription held back when the message was a suspect one. Here the dead-letter stream
// stores the copy without acknowledging it (NoAck), then acknowledges again, and the test cuts
// the subscription's connection: the settlement fails at once with the copy not stored, the
// message is delivered again, and its copy, published again, is dropped as a duplicate: one
// dead letter.
func TestDeadLetterCopyStopsWaitingAtDrop(t *testing.T) {
	_, url, p := proxied(t, freePort(t), t.TempDir(), 4310, 4311, 4312, 4313, 4314, 4315, 4316, 4317, 4318, 4319)
	r := newRig(t, "nats://"+p.Addr(), clock.Real(), natsjs.DeclareTopology(true), natsjs.RequestTimeout(30*time.Second))
	direct := newAdmin(t, url) // not cut with the subscription's connection
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	dead := r.subject("dead")
	cfg := jetstream.StreamConfig{Name: r.stream("dead"), Subjects: []string{dead}, NoAck: true}
	if _, err := direct.js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return errors.New("poison") },
		core.WithCodec(core.Raw), core.DeadLetterAfter(1, dead)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	r.publish("work", "poison", nil)
	waitStored(ctx, t, direct, r.stream("dead")) // the copy; its acknowledgement will not come
	cfg.NoAck = false
	if _, err := direct.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	cut := time.Now()
	p.Cut()
	p.Restore()
	recs := waitLog(t, r.logs, "nats: dead-letter copy not stored; the message is held, then delivered again")
	d := time.Since(cut)
	t.Logf("the copy's settlement failed %v after the cut: %v", d, recs[0].Attrs["error"])
	if d > 2*time.Second {
		t.Fatalf("the copy's settlement failed %v after the cut; want within 2s (RequestTimeout is 30s)", d)
	}
	if err := fmt.Sprint(recs[0].Attrs["error"]); !contains(err, "connection to NATS dropped") {
		t.Errorf("error %q does not say the connection dropped", err)
	}
	r.rec.WaitFor(func(ss []core.Settlement) bool {
		for _, s := range ss {
			if s.Verdict.Action == core.ActDeadLetter && s.Err == nil {
				return true
			}
		}
		return false
	})
	st, err := direct.js.Stream(ctx, r.stream("dead"))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("%d copies in the dead-letter stream; want 1 (the second publish is a duplicate)", n)
	}
}

// Publish returns at once, saying so, when the connection drops while it waits for the
// acknowledgement (here of a stream that stores without acknowledging), not at RequestTimeout.
func TestPublishStopsWaitingAtDrop(t *testing.T) {
	_, url, p := proxied(t, freePort(t), t.TempDir(), 4310, 4311, 4312, 4313, 4314, 4315, 4316, 4317, 4318, 4319)
	r := newRig(t, "nats://"+p.Addr(), clock.Real(), natsjs.RequestTimeout(30*time.Second))
	direct := newAdmin(t, url)
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: r.stream("quiet"), Subjects: []string{r.subject("quiet")}, NoAck: true}
	if _, err := direct.js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := natsjs.Publish(ctx, r.conn, r.subject("quiet"), "hello", natsjs.WithMsgID("m1"))
		done <- err
	}()
	waitStored(ctx, t, direct, r.stream("quiet"))
	cut := time.Now()
	p.Cut()
	p.Restore()
	select {
	case err := <-done:
		t.Logf("Publish returned %v after the cut: %v", time.Since(cut), err)
		if err == nil || !contains(err.Error(), "connection to NATS dropped") {
			t.Fatalf("Publish returned %v; want an error saying the connection dropped", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Publish still waiting 2s after the cut (RequestTimeout is 30s)")
	}
}
