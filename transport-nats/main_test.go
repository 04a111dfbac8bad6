package natsjs_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// realURL is the NATS server (with JetStream) the tests run against besides the embedded one.
var realURL = coretest.Env("SETTLE_TEST_NATS_URL", "nats://127.0.0.1:4222")

// embedded is the package's in-process nats-server, started by TestMain.
var embedded *natstest.Server

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	dir, err := os.MkdirTemp("", "settle-natsjs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	embedded, err = natstest.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// nats-server removes its account's streams directory, asynchronously, when a delete leaves it
	// empty, racing a stream created meanwhile ("could not create storage directory"). A stream
	// kept for the whole run keeps the directory, on both servers, while tests come and go.
	dropAnchors := []func(){anchor(embedded.URL())}
	if nc, err := nats.Connect(realURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		dropAnchors = append(dropAnchors, anchor(realURL))
	}
	code := m.Run()
	for _, drop := range dropAnchors {
		drop()
	}
	embedded.Shutdown()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// anchor creates a stream of this run on the server at url and returns its removal.
func anchor(url string) func() {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return func() {}
	}
	js, _ := jetstream.New(nc)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "settle_test_anchor_" + hex.EncodeToString(b[:])
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}}); err != nil {
		fmt.Fprintf(os.Stderr, "anchor stream on %s: %v\n", url, err)
	}
	return func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
		nc.Close()
	}
}

// server is one target of the tests: the real server or the embedded one.
type server struct {
	name string
	url  func(t testing.TB) string
}

var servers = []server{
	{"real", realServer},
	{"embedded", func(testing.TB) string { return embedded.URL() }},
}

// eachServer runs f as a subtest on the real server and on the embedded one.
func eachServer(t *testing.T, f func(t *testing.T, url string)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { f(t, s.url(t)) })
	}
}

// realServer returns the real server's URL, or skips (fails under SETTLE_REQUIRE_SERVERS=1)
// when it cannot be reached or has no JetStream.
func realServer(t testing.TB) string {
	t.Helper()
	nc, err := nats.Connect(realURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err == nil {
		defer nc.Close()
		var js jetstream.JetStream
		if js, err = jetstream.New(nc); err == nil {
			ctx, cancel := contextWithTimeout(2 * time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
		}
	}
	if err != nil {
		coretest.ServerUnavailable(t, "NATS with JetStream", realURL+" (SETTLE_TEST_NATS_URL)", err)
	}
	return realURL
}

func testLogger() *slog.Logger {
	if os.Getenv("SETTLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
