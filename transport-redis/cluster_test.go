package redisq_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/transporttest"
	redisq "github.com/settlehq/settle/transport-redis"
	"github.com/settlehq/settle/transport-redis/redistest"
)

// The conformance suite on a Redis Cluster of three masters the test starts on loopback ports.
// Each test's keys share one hash tag, so a queue's stream, delay set and dead-letter stream
// live in one slot, and different tests' keys spread over the masters.
func TestTransportOnCluster(t *testing.T) {
	if _, err := redistest.Binary(); err != nil {
		coretest.ServerUnavailable(t, "a redis-server binary to start", "PATH or SETTLE_REDIS_SERVER", err)
	}
	cl, err := redistest.StartCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatalf("start a cluster of 3: %v", err)
	}
	t.Cleanup(cl.Stop)
	url := cl.URL()
	transporttest.Run(t, func(t *testing.T) transporttest.Env {
		prefix := "{" + uniquePrefix() + "}"
		co, err := redis.ParseClusterURL(url)
		if err != nil {
			t.Fatal(err)
		}
		admin := redis.NewClusterClient(co)
		t.Cleanup(func() { _ = admin.Close() })
		b := &backend{t: t, url: url, prefix: prefix, admin: admin, copts: []redisq.Option{redisq.Cluster()}}
		return transporttest.Env{Backend: b, Clock: clock.Real(),
			Features: transporttest.Features{CountsAtTake: true, Publish: publishFeatures}}
	})
}
