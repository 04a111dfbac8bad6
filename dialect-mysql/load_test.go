package mysql

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
	"github.com/settlehq/settle/core/sqlqueue"
)

// TestConcurrentClaimantsUnderLoad runs, per form, three Apps of four workers each on one
// MariaDB queue while a publisher keeps inserting, with a fifth of the messages retried once:
// claims, settlements and inserts contend for the same rows and index pages. Every message
// must be acknowledged exactly once, no settlement may fail, and no claim error (a deadlock or
// lock wait timeout included) may surface: those are retried inside the dialect.
func TestConcurrentClaimantsUnderLoad(t *testing.T) {
	s := mariadbServer(t)
	forms := []struct {
		name string
		ep   func(*DB, sqlqueue.Table, string) (core.Endpoint, error)
	}{{"rowlock", RowLock}, {"lease", Lease}, {"advisory", Advisory}}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openDB(t, s)
			tb := sqlqueue.StandardTable("jobs")
			tb.Columns.ProcessedAt = "" // acks delete: the contention is on the rows themselves
			if err := db.CreateTable(ctx, tb); err != nil {
				t.Fatal(err)
			}
			pub, err := NewPublisher(db, tb, "load")
			if err != nil {
				t.Fatal(err)
			}
			const n = 1500
			logs := &coretest.Logs{}
			var mu sync.Mutex
			acked := map[string]int{}
			all := make(chan struct{})
			var failures []string
			observe := func(st core.Settlement) {
				mu.Lock()
				defer mu.Unlock()
				if st.Err != nil {
					failures = append(failures, st.Delivery.ID()+": "+st.Err.Error())
				}
				if st.Verdict.Action == core.ActAck && st.Err == nil {
					acked[st.Delivery.ID()]++
					if len(acked) == n && all != nil {
						close(all)
						all = nil
					}
				}
			}
			h := func(ctx context.Context, m *core.Message[int]) error {
				if m.Payload%5 == 0 && m.Attempt() == 1 {
					return core.Retry()
				}
				return nil
			}
			runCtx, stop := context.WithCancel(ctx)
			var apps sync.WaitGroup
			for range 3 {
				app := core.New(core.WithoutSignals(), core.WithLogger(slog.New(logs)), core.WithObserver(observe))
				ep, err := f.ep(db, tb, "load")
				if err != nil {
					t.Fatal(err)
				}
				if err := core.Subscribe(app, ep, h, core.Workers(4), sqlqueue.BatchSize(25), sqlqueue.PollInterval(5*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				apps.Add(1)
				go func() {
					defer apps.Done()
					if err := app.Run(runCtx); err != nil {
						t.Errorf("App.Run: %v", err)
					}
				}()
			}
			done := all
			for i := range n {
				if _, err := sqlqueue.Publish(ctx, pub, i); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				mu.Lock()
				t.Errorf("acknowledged %d of %d messages", len(acked), n)
				mu.Unlock()
			}
			stop()
			apps.Wait()
			mu.Lock()
			defer mu.Unlock()
			for id, c := range acked {
				if c != 1 {
					t.Errorf("message %s acknowledged %d times", id, c)
				}
			}
			if len(failures) > 0 {
				t.Errorf("%d settlements failed, e.g. %s", len(failures), failures[0])
			}
			for _, r := range logs.Records(slog.LevelWarn) {
				text := r.Message
				for _, v := range r.Attrs {
					if e, ok := v.(error); ok {
						text += " " + e.Error()
					}
				}
				if strings.Contains(text, "taking the next delivery failed") || strings.Contains(text, "Deadlock") || strings.Contains(text, "Lock wait") {
					t.Errorf("logged: %s", text)
				}
			}
			t.Logf("%s: %d messages acknowledged once each; claims restarted after a deadlock or lock wait timeout so far (all forms): %d",
				f.name, len(acked), claimRestarts.Load())
			var left int
			if err := db.Pool().QueryRowContext(ctx, "SELECT COUNT(*) FROM jobs").Scan(&left); err != nil || left != 0 {
				t.Errorf("%d rows left in the queue (%v)", left, err)
			}
		})
	}
}
