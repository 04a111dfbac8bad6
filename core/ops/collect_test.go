package ops_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/ops"
)

// TestCollectPagesThroughEveryDeadLetter: Collect follows ListDead's cursor across pages, keeps
// only what the filter selects, and stops at max.
func TestCollectPagesThroughEveryDeadLetter(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	b := coretest.NewBroker(clk, nil)
	const n = 2*ops.DefaultLimit + 7 // three pages
	for i := range n {
		reason := "card processor timeout"
		if i%3 == 0 {
			reason = "card closed"
		}
		b.PublishDead("refunds.dead", []byte(strconv.Itoa(i)), map[string]string{
			core.HeaderRetryCount: "3", core.HeaderOrigin: "refunds",
			core.HeaderDeadAt: clk.Now().Format(time.RFC3339), core.HeaderError: reason,
		})
	}
	q := b.Ops("refunds", "refunds.dead")
	ctx := context.Background()
	all, err := ops.Collect(ctx, q, ops.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("Collect without a bound returned %d dead letters, want %d", len(all), n)
	}
	for i, d := range all { // oldest first, each once
		if string(d.Payload) != strconv.Itoa(i) {
			t.Fatalf("dead letter %d has payload %q, want %d", i, d.Payload, i)
		}
	}
	closed, err := ops.Collect(ctx, q, ops.Filter{Reason: "closed"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (n + 2) / 3; len(closed) != want {
		t.Fatalf("Collect(reason~closed) returned %d, want %d", len(closed), want)
	}
	for _, d := range closed {
		if d.Reason != "card closed" {
			t.Fatalf("Collect(reason~closed) returned %+v", d)
		}
	}
	some, err := ops.Collect(ctx, q, ops.Filter{}, ops.DefaultLimit+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != ops.DefaultLimit+1 || string(some[ops.DefaultLimit].Payload) != strconv.Itoa(ops.DefaultLimit) {
		t.Fatalf("Collect(max %d) returned %d", ops.DefaultLimit+1, len(some))
	}
}
