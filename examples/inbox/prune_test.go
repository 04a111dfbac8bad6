package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/inbox"
)

// delivery is a bare delivery for driving the inbox's middleware directly.
type delivery string

func (d delivery) ID() string                 { return string(d) }
func (d delivery) Attempt() int               { return 1 }
func (d delivery) Body() []byte               { return nil }
func (d delivery) Headers() map[string]string { return nil }

// TestPruneForgetsOldIds: on each database, Prune deletes the ids older than the retention and
// keeps the younger ones; a duplicate of a pruned id runs the handler again (the documented
// trade-off), one of a kept id does not. Start refuses a missing table, naming DDL.
func TestPruneForgetsOldIds(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			on := db.open(t)
			v := clock.NewVirtual(time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC))
			missing, err := inbox.New(on.d, on.db, "no_such_inbox")
			if err != nil {
				t.Fatal(err)
			}
			if err := missing.Start(ctx); err == nil || !strings.Contains(err.Error(), "inbox.DDL") {
				t.Errorf("Start on a missing table: %v", err)
			}
			ddl, err := inbox.DDL(on.d, "box")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := on.db.Exec(ctx, ddl); err != nil {
				t.Fatal(err)
			}
			box, err := inbox.New(on.d, on.db, "box", inbox.WithClock(v), inbox.Retain(24*time.Hour, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			// Not started: its background prune would race the one below on the virtual clock.
			calls := map[string]int{}
			h := box.Middleware(func(_ context.Context, d core.Delivery) error { calls[d.ID()]++; return nil })
			for _, id := range []string{"old-1", "old-2"} {
				if err := h(ctx, delivery(id)); err != nil {
					t.Fatal(err)
				}
			}
			v.Advance(20 * time.Hour)
			if err := h(ctx, delivery("young")); err != nil {
				t.Fatal(err)
			}
			v.Advance(5 * time.Hour) // old-* are 25 h old, young 5 h
			n, err := box.Prune(ctx)
			if err != nil || n != 2 {
				t.Fatalf("Prune: %d rows, %v; want the 2 old ids", n, err)
			}
			for _, id := range []string{"old-1", "young"} {
				if err := h(ctx, delivery(id)); err != nil {
					t.Fatal(err)
				}
			}
			if calls["old-1"] != 2 || calls["young"] != 1 {
				t.Errorf("handler calls %v: want old-1 run again after its id was pruned, young not", calls)
			}
		})
	}
}
