package mysql

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// TestLeaseDrainByFourClaimants drains a preloaded queue with four lease subscriptions of one
// worker each, claims of 100: each claimant settles its previous batch and claims the next in
// one transaction, right behind the others, which is where MariaDB has been seen to pick one
// claim's SKIP LOCKED scan as a deadlock victim. No claim error may be logged: the dialect
// restarts such a claim (replaying the settlements before it).
func TestLeaseDrainByFourClaimants(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	tb.Columns.Group, tb.Columns.ProcessedAt = "", ""
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	if _, err := db.Pool().ExecContext(ctx, "INSERT INTO jobs (payload) SELECT '1' FROM seq_1_to_20000"); err != nil {
		t.Fatal(err)
	}
	logs := &coretest.Logs{}
	var settled, failed atomic.Int64
	all := make(chan struct{})
	app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)), core.WithObserver(func(st core.Settlement) {
		if st.Err != nil {
			failed.Add(1)
		}
		if settled.Add(1) == n {
			close(all)
		}
	}))
	for i := range 4 {
		ep, err := Lease(db, tb, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := core.Subscribe(app, ep, func(context.Context, *core.Message[int]) error { return nil },
			core.Name("c"+string(rune('0'+i))), sqlqueue.BatchSize(100)); err != nil {
			t.Fatal(err)
		}
	}
	before := claimRestarts.Load()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		t.Errorf("settled %d of %d", settled.Load(), n)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f := failed.Load(); f != 0 {
		t.Errorf("%d settlements failed", f)
	}
	for _, r := range logs.Records(slog.LevelWarn) {
		if strings.Contains(r.Message, "taking the next delivery failed") || strings.Contains(r.Message, "settlement failed") {
			t.Errorf("logged: %s %v", r.Message, r.Attrs)
		}
	}
	var left int
	if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows left (%v)", left, err)
	}
	t.Logf("%d messages drained; claims restarted after a deadlock or lock wait timeout: %d", n, claimRestarts.Load()-before)
}
