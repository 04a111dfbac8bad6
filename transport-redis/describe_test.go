package redisq_test

import (
	"testing"

	"github.com/settlehq/settle/core"
	redisq "github.com/settlehq/settle/transport-redis"
)

// TestDescribeSaysWhatIsConfigured: a queue describes its stream, group, companion keys and
// settings as configured, where its delays wait, and its dead-letter stream when it has a cap;
// nothing is read from a server.
func TestDescribeSaysWhatIsConfigured(t *testing.T) {
	c, err := redisq.Open("redis://127.0.0.1:1/0") // never started: Describe touches no server
	if err != nil {
		t.Fatal(err)
	}
	q, err := redisq.NewQueue(c, "{refunds}", redisq.Group("billing"))
	if err != nil {
		t.Fatal(err)
	}
	d := q.Describe(core.SubscriptionDescription{Name: "refunds", Queue: "{refunds}", Cap: 5, DeadLetterTo: "{refunds}.dead"})
	if d.Backend != core.BackendRedis || d.Settings["stream"] != "{refunds}" || d.Settings["group"] != "billing" ||
		d.Settings["delayed_set"] != "{refunds}"+redisq.DelayedSuffix || d.Settings["dedup_hash"] != "{refunds}"+redisq.DedupSuffix {
		t.Fatalf("description %+v", d)
	}
	if len(d.Related) != 1 || d.Related[0].Role != core.RoleDeadLetter || d.Related[0].Name != "{refunds}.dead" {
		t.Fatalf("related %+v, want the dead-letter stream", d.Related)
	}
	if d := q.Describe(core.SubscriptionDescription{Name: "refunds", Queue: "{refunds}"}); len(d.Related) != 0 {
		t.Fatalf("without a cap the queue names related queues %+v", d.Related)
	}
}
