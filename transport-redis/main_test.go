package redisq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core/coretest"
)

// realURL is the Redis server the tests run against.
var realURL = coretest.Env("SETTLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// realServer returns the real server's URL, or skips (fails under SETTLE_REQUIRE_SERVERS=1)
// when it cannot be reached.
func realServer(t testing.TB) string {
	t.Helper()
	opts, err := redis.ParseURL(realURL)
	if err == nil {
		opts.MaxRetries = -1 // one try: an absent server skips at once
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = rdb.Ping(ctx).Err()
	}
	if err != nil {
		coretest.ServerUnavailable(t, "Redis", realURL+" (SETTLE_TEST_REDIS_URL)", err)
	}
	return realURL
}

// uniquePrefix is a key prefix no other test uses.
func uniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "settle-test-" + hex.EncodeToString(b[:]) + ":"
}

// newAdmin is a plain go-redis client for setting up and reading back the server, outside
// settle; it deletes the keys under prefix when the test ends.
func newAdmin(t testing.TB, url, prefix string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scan keys %s*: %v", prefix, err)
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("delete keys %s*: %v", prefix, err)
			}
		}
		_ = rdb.Close()
	})
	return rdb
}

func testLogger() *slog.Logger {
	if os.Getenv("SETTLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
