package natsjs_test

import (
	"context"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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

// After the server restarts (down for 3s), the subscription settles again as soon as it has
// reconnected: measured 50-270ms after the server accepts connections (the client's reconnect
// wait is 250ms). A guard, not a fix: a fetch pending while the server is down does not fail
// (no backoff in core grows meanwhile), and the pull request survives the reconnection.
func TestRestartedServerServesAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	s := ownServer(t, port, dir)
	t.Cleanup(func() { s.Shutdown() })
	url := s.ClientURL()
	r := newRig(t, url, clock.Real(), natsjs.DeclareTopology(true))
	if err := core.Subscribe(r.app, r.queue("work"), func(context.Context, *core.Message[string]) error { return nil },
		core.WithCodec(core.Raw)); err != nil {
		t.Fatal(err)
	}
	r.mustStart()
	r.publish("work", "before", nil)
	r.rec.WaitSettled(1)
	s.Shutdown()
	s.WaitForShutdown()
	time.Sleep(3 * time.Second) // the fault: the server stays down for a while
	s = ownServer(t, port, dir)
	back := time.Now()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout(coretest.WaitTimeout)
	defer cancel()
	if _, err := js.Publish(ctx, r.subject("work"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	r.rec.WaitSettled(2)
	d := time.Since(back)
	t.Logf("first settlement %v after the server was back", d)
	if d > time.Second {
		t.Fatalf("first settlement %v after the server was back; want within 1s (reconnect wait 250ms)", d)
	}
}
