package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-sqlite"
)

func main() {
	path := flag.String("db", "outbox.db", "SQLite database file")
	flag.Parse()
	if err := run(context.Background(), *path); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

// Service is the wired payouts service.
type Service struct {
	DB  *sqlite.DB
	Box *outbox.Outbox
	App *core.App
	// Done receives settlements as they happen (dropped when nobody reads: it is for watching).
	Done chan core.Settlement
	// Acked counts acknowledged deliveries.
	Acked atomic.Int64
}

// NewService opens the database, creates the schema and wires the outbox, its relay into the
// queue table and the payouts receiver. opts are added to the App's options.
func NewService(ctx context.Context, path string, log *slog.Logger, opts ...core.AppOption) (*Service, error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := Schema(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	pub, err := NewQueuePublisher(db, PayoutQueue)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Service{DB: db, Done: make(chan core.Settlement, 64)}
	appOpts := append([]core.AppOption{core.WithLogger(log), core.WithObserver(func(st core.Settlement) {
		if st.Verdict.Action == core.ActAck && st.Err == nil {
			s.Acked.Add(1)
		}
		select {
		case s.Done <- st:
		default:
		}
	})}, opts...)
	s.App = core.New(appOpts...)
	s.Box, err = outbox.New(db.Dialect(), db.Queue(), outbox.StandardTable(OutboxTable), pub,
		outbox.WithLogger(log), outbox.WithClock(s.App.Clock()))
	if err != nil {
		db.Close()
		return nil, err
	}
	s.App.Register(s.Box)
	queue, err := sqlite.Lease(db, sqlqueue.StandardTable(QueueTable), PayoutQueue)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := core.Subscribe(s.App, queue, HandlePayout, sqlqueue.Transactional(), s.Box.Receiver(),
		core.DeadLetterAfter(5, "payouts.dead"), sqlqueue.PollInterval(50*time.Millisecond)); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func run(ctx context.Context, path string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewService(ctx, path, log)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- s.App.Run(ctx) }()

	suffix := time.Now().Format("150405.000")
	orders := []string{"o-1-" + suffix, "o-2-" + suffix, "down-3-" + suffix}
	for i, id := range orders {
		if err := PlaceOrder(ctx, s.DB, s.Box, id, int64(1000*(i+1))); err != nil {
			return err
		}
	}
	// Wait until every order is booked; the "down" order retries once first. A record delivered
	// twice would be acknowledged the second time without the handler.
	timeout := time.After(15 * time.Second)
	var ledger map[string]int
	for booked := false; !booked; {
		select {
		case st := <-s.Done:
			fmt.Printf("payout message %s attempt %d: %s\n", st.Delivery.ID(), st.Delivery.Attempt(), st.Verdict)
		case <-timeout:
			return fmt.Errorf("payouts not processed within 15s")
		}
		if ledger, err = Ledger(ctx, s.DB.Pool()); err != nil {
			return err
		}
		booked = true
		for _, id := range orders {
			booked = booked && ledger[id] > 0
		}
	}
	for _, id := range orders {
		fmt.Printf("order %s: %d ledger entry\n", id, ledger[id])
	}
	stop()
	return <-ran
}
