package natsjs_test

import (
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
	code := m.Run()
	embedded.Shutdown()
	_ = os.RemoveAll(dir)
	os.Exit(code)
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
