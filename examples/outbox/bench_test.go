package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-sqlite"
)

// BenchmarkPayouts measures one payout end to end: the order's transaction, the message
// through the queue table, the handler booking the ledger in its delivery's transaction.
// "outbox" records the message in the outbox and relays it after commit, and the receiver
// looks the record up and marks it; "direct" publishes into the queue table inside the order's
// transaction instead (the same handler, no outbox). The ratio is the outbox's cost.
//
//	go test ./examples/outbox -run '^$' -bench Payouts -benchtime 2000x
func BenchmarkPayouts(b *testing.B) {
	for _, mode := range []string{"direct", "outbox"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			s, err := NewService(ctx, filepath.Join(b.TempDir(), "b.db"), slog.New(slog.DiscardHandler), core.WithoutSignals())
			if err != nil {
				b.Fatal(err)
			}
			defer s.DB.Close()
			direct, err := sqlite.NewPublisher(s.DB, sqlqueue.StandardTable(QueueTable), PayoutQueue)
			if err != nil {
				b.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- s.App.Run(runCtx) }()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				id := "o-" + strconv.Itoa(i)
				if mode == "outbox" {
					err = PlaceOrder(ctx, s.DB, s.Box, id, 100)
				} else {
					err = placeDirect(ctx, s.DB, direct, id)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for timeout := time.After(time.Minute); s.Acked.Load() < int64(b.N); {
				select {
				case <-s.Done:
				case <-timeout:
					b.Fatalf("%d of %d booked", s.Acked.Load(), b.N)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payouts/s")
			stop()
			<-ran
		})
	}
}

func placeDirect(ctx context.Context, db *sqlite.DB, pub *sqlqueue.Publisher, id string) error {
	tx, err := db.Pool().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, cents) VALUES (?, 100)`, id); err != nil {
		return err
	}
	if _, err := sqlqueue.Publish(ctx, pub, Payout{Order: id, Cents: 100}, sqlite.InTx(tx)); err != nil {
		return err
	}
	return tx.Commit()
}
