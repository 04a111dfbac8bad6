package redisq_test

import (
	"context"
	"testing"

	"github.com/settlehq/settle/core"
	redisq "github.com/settlehq/settle/transport-redis"
)

// A dedup key is held from the publish through retries until the message is acknowledged or
// dead-lettered; then the key publishes again.
func TestDedupKeyHeldUntilSettled(t *testing.T) {
	url := realServer(t)
	prefix := uniquePrefix()
	admin := newAdmin(t, url, prefix)
	stream, dead := prefix+"work", prefix+"work.dead"
	c, err := redisq.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	pub, err := core.NewPublisher[string](mustQueue(t, c, stream), core.PublishCodec(core.Raw))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	publishKey := func(body, key string) core.Receipt {
		t.Helper()
		r, err := pub.Publish(ctx, body, core.DedupKey(key))
		if err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
		return r
	}
	first := publishKey("a1", "a")
	if r := publishKey("a2", "a"); !r.Duplicate || r.ID != first.ID {
		t.Fatalf("second publish of key a while pending: %+v, want a duplicate of %s", r, first.ID)
	}
	publishKey("b1", "b")
	retried := make(chan struct{}, 1)
	a := run(t, url, stream, func(_ context.Context, m *core.Message[string]) error {
		if m.Payload == "b1" {
			return core.Retry() // b dies at its cap of 2
		}
		if m.Attempt() == 1 {
			retried <- struct{}{}
			return core.Retry()
		}
		return nil
	}, nil, raw, core.DeadLetterAfter(2, dead))
	<-retried
	a.rec.WaitFor(func(s []core.Settlement) bool { return len(s) >= 4 })
	a.stop()
	for _, s := range a.rec.Settlements() {
		if s.Err != nil {
			t.Fatalf("settlement %v: %v", s.Verdict, s.Err)
		}
	}
	if n := admin.HLen(ctx, stream+redisq.DedupSuffix).Val(); n != 0 {
		t.Fatalf("dedup index holds %d keys after every message settled", n)
	}
	if r := publishKey("a3", "a"); r.Duplicate {
		t.Fatalf("key a after its message was acknowledged: %+v, want stored", r)
	}
	if r := publishKey("b2", "b"); r.Duplicate {
		t.Fatalf("key b after its message was dead-lettered: %+v, want stored", r)
	}
}
