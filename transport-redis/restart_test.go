package redisq_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	redisq "github.com/settlehq/settle/transport-redis"
	"github.com/settlehq/settle/transport-redis/redistest"
)

// startOwnRedis starts a redis-server of the test's own (appendfsync as given), or skips when
// there is no binary (fails under SETTLE_REQUIRE_SERVERS=1).
func startOwnRedis(t *testing.T, fsync string) *redistest.Server {
	t.Helper()
	bin, err := redistest.Binary()
	if err != nil {
		coretest.ServerUnavailable(t, "a redis-server binary to start", "PATH or SETTLE_REDIS_SERVER", err)
	}
	if _, err := exec.LookPath(bin); err != nil {
		coretest.ServerUnavailable(t, "a redis-server binary to start", bin+" (SETTLE_REDIS_SERVER)", err)
	}
	srv, err := redistest.Start(t.TempDir(), fsync)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// Redis killed with SIGKILL in the middle of a drain and started again (appendfsync always)
// loses nothing and settles nothing twice: every message is handled and leaves the stream, and
// none is delivered again after an ack Redis confirmed. Entries whose settlement failed while it
// was down come back once their lease has run out.
func TestRedisRestartMidDrain(t *testing.T) {
	srv := startOwnRedis(t, "always")
	url := srv.URL()
	stream := "{restart}"
	const total = 60
	for i := range total {
		publish(t, url, stream, "m"+strconv.Itoa(i), nil)
	}

	var (
		mu        sync.Mutex
		acked     = map[string]bool{}
		handled   = map[string]bool{}
		afterAck  []string
		delivered atomic.Int32
	)
	killNow := make(chan struct{})
	killed := make(chan struct{})
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		mu.Lock()
		handled[m.Payload] = true
		if acked[m.Payload] {
			afterAck = append(afterAck, m.Payload)
		}
		mu.Unlock()
		switch n := delivered.Add(1); {
		case n == total/3:
			close(killNow)
			<-killed
		case n > total/3:
			<-killed // every later ack meets a server that is down or restarting
		}
		return nil
	}, []redisq.QueueOption{redisq.Lease(500 * time.Millisecond), redisq.Block(100 * time.Millisecond)},
		raw, core.Workers(4), core.OnSettled(func(s core.Settlement) {
			if s.Err == nil && s.Verdict.Action == core.ActAck {
				mu.Lock()
				acked[string(s.Delivery.Body())] = true
				mu.Unlock()
			}
		}))

	<-killNow
	if err := srv.Kill(); err != nil {
		t.Fatalf("kill redis-server: %v", err)
	}
	close(killed)
	// Keep it down until settlements have failed (go-redis's retries included), so that entries
	// come back through their leases after the restart.
	a.rec.WaitFor(func(all []core.Settlement) bool {
		for _, s := range all {
			if s.Err != nil {
				return true
			}
		}
		return false
	})
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}

	// Done when every message was handled and Redis holds none of them any more: an ack whose
	// reply the kill cut off may have been applied, and is then reported failed.
	admin := newAdmin(t, url, "{restart}")
	a.rec.WaitFor(func([]core.Settlement) bool {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		return n == total && admin.XLen(context.Background(), stream).Val() == 0
	})
	a.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(afterAck) > 0 {
		t.Fatalf("delivered again after a confirmed ack: %v", afterAck)
	}
	failed := 0
	for _, s := range a.rec.Settlements() {
		if s.Err != nil {
			failed++
			if !errors.Is(s.Err, redisq.ErrLeaseLost) && !isConnErr(s.Err) {
				t.Errorf("settlement failed for another reason than the restart: %v", s.Err)
			}
		}
	}
	t.Logf("%d messages, %d deliveries, %d settlements failed while Redis was down", total, delivered.Load(), failed)
	if n := admin.XPending(context.Background(), stream, "settle").Val(); n.Count != 0 {
		t.Fatalf("%d entries still pending after every message was acknowledged", n.Count)
	}
}

// isConnErr reports an error of a command that did not reach the server.
func isConnErr(err error) bool {
	var op interface{ Timeout() bool }
	return errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) || containsAny(err.Error(),
		"connection refused", "connection reset", "EOF", "broken pipe", "LOADING")
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		for i := 0; i+len(x) <= len(s); i++ {
			if s[i:i+len(x)] == x {
				return true
			}
		}
	}
	return false
}
