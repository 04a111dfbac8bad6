package mysql

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// TestAdvisorySkipsKeysHeldElsewhere: a row whose GET_LOCK name another connection holds is
// left out of the candidates query (KeyFree, IS_USED_LOCK), so a claimant with a window of one
// row takes the next free row at once instead of trying the held one and waiting for the poll
// (which, on the virtual clock, never comes).
func TestAdvisorySkipsKeysHeldElsewhere(t *testing.T) {
	s := mariadbServer(t)
	ctx := context.Background()
	db := openDB(t, s)
	tb := sqlqueue.StandardTable("jobs")
	tb.Columns.Group, tb.Columns.ProcessedAt = "", ""
	if err := db.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(db, tb, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"held", "free"} {
		if _, err := sqlqueue.Publish(ctx, pub, p); err != nil {
			t.Fatal(err)
		}
	}
	var first int64
	if err := db.Pool().QueryRowContext(ctx, "SELECT MIN(id) FROM jobs").Scan(&first); err != nil {
		t.Fatal(err)
	}
	other, err := db.Pool().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The name the engine locks for a row: "<database>.<table>:<id>" under settle's prefix.
	name := lockName(db.Database() + ".jobs:" + itoa(first))
	var got int
	if err := other.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK(%s) = %d, %v", name, got, err)
	}
	v := clock.NewVirtual(coretest.Epoch)
	settled := make(chan core.Settlement, 4)
	app := core.New(core.WithClock(v), core.WithoutSignals(), core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(s core.Settlement) { settled <- s }))
	ep, err := Advisory(db, tb, "")
	if err != nil {
		t.Fatal(err)
	}
	payloads := make(chan string, 2)
	if err := core.Subscribe(app, ep, func(_ context.Context, m *core.Message[string]) error {
		payloads <- m.Payload
		return nil
	}, sqlqueue.BatchSize(1)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() { stop(); <-done }()
	select {
	case s := <-settled:
		if s.Err != nil || s.Verdict.Action != core.ActAck {
			t.Fatalf("settlement %+v", s)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the free row was not taken while the held one blocked the window")
	}
	if p := <-payloads; p != "free" {
		t.Fatalf("took %q, want the row whose key is free", p)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
