package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

// tagPropagator injects a fixed traceparent.
type tagPropagator string

func (p tagPropagator) Inject(_ context.Context, h map[string]string) { h["traceparent"] = string(p) }

// A record keeps the trace context of the transaction that wrote it (Record's context), and the
// relay sends it on: the consumer's span links to the request that booked the payout, not to
// the relay. The caller's headers are not modified.
func TestRecordKeepsTheWritersTraceContext(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Schema(ctx, db); err != nil {
		t.Fatal(err)
	}
	sent := make(chan map[string]string, 2)
	box, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable),
		outbox.PublisherFunc(func(_ context.Context, _ string, _ []byte, h map[string]string) error {
			sent <- h
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), nil, outbox.WithPropagator(nil)); err == nil {
		t.Error("WithPropagator(nil) accepted")
	}
	mine := map[string]string{"k": "v"}
	writer := core.ContextWithPropagator(ctx, tagPropagator("00-writer-01"))
	b, err := box.Record(writer, sqlqueue.StdDB(db.Pool()), outbox.Message{Destination: PayoutQueue, Payload: []byte(`{}`), Headers: mine})
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 1 {
		t.Fatalf("the caller's headers were modified: %v", mine)
	}
	// The relay publishes from a context of its own, with another trace (or none).
	if err := box.Send(core.ContextWithPropagator(ctx, tagPropagator("00-relay-01")), b); err != nil {
		t.Fatal(err)
	}
	h := <-sent
	if h["traceparent"] != "00-writer-01" || h["k"] != "v" || h[outbox.HeaderID] == "" {
		t.Fatalf("relayed headers %v", h)
	}
}
