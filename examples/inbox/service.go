package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/inbox"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
)

// Payment is what the payments service consumes from the broker.
type Payment struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Receipt is what it sends on, through its outbox, for each payment booked.
type Receipt struct {
	Payment string `json:"payment"`
	Amount  int    `json:"amount"`
}

// ReceiptsDestination is where the outbox relays receipts.
const ReceiptsDestination = "receipts"

// Service is the payments service: a broker consumer whose handler books each payment in the
// ledger table and records a receipt in the outbox, in the inbox's transaction.
type Service struct {
	D      sqlqueue.Dialect
	DB     sqlqueue.DB
	Inbox  *inbox.Inbox
	Outbox *outbox.Outbox
	// Names of the service's tables (a prefix keeps tests on shared servers apart).
	Ledger, InboxTable, OutboxTable string
}

// NewService creates the service's tables (ledger, inbox, outbox, under prefix) on db and
// registers its inbox and outbox with app; relay publishes the receipts. c is the clock of the
// inbox and the outbox: the App's.
func NewService(ctx context.Context, app *core.App, c clock.Clock, d sqlqueue.Dialect, db sqlqueue.DB, prefix string, relay outbox.Publisher, log *slog.Logger) (*Service, error) {
	s := &Service{D: d, DB: db, Ledger: prefix + "ledger", InboxTable: prefix + "inbox", OutboxTable: prefix + "outbox"}
	inboxDDL, err := inbox.DDL(d, s.InboxTable)
	if err != nil {
		return nil, err
	}
	outboxDDL, err := outbox.DDL(d, s.OutboxTable)
	if err != nil {
		return nil, err
	}
	ledgerDDL := "CREATE TABLE IF NOT EXISTS " + d.Quote(s.Ledger) + " (" + d.Quote("payment") + " VARCHAR(191) NOT NULL, " + d.Quote("amount") + " INTEGER NOT NULL)"
	for _, ddl := range []string{inboxDDL, outboxDDL, ledgerDDL} {
		if _, err := db.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("creating the payments schema: %w", err)
		}
	}
	if s.Inbox, err = inbox.New(d, db, s.InboxTable, inbox.WithClock(c), inbox.WithLogger(log)); err != nil {
		return nil, err
	}
	if s.Outbox, err = outbox.New(d, db, outbox.StandardTable(s.OutboxTable), relay, outbox.WithClock(c),
		outbox.WithLogger(log), outbox.SweepEvery(time.Second), outbox.Destinations(ReceiptsDestination)); err != nil {
		return nil, err
	}
	app.Register(s.Inbox)
	app.Register(s.Outbox)
	return s, nil
}

// Subscribe mounts the payments handler on ep behind the inbox; opts come first (a dead letter,
// middleware of a test, which runs outside the inbox).
func (s *Service) Subscribe(app *core.App, ep core.Endpoint, opts ...core.Option) error {
	insert := "INSERT INTO " + s.D.Quote(s.Ledger) + " (" + s.D.Quote("payment") + ", " + s.D.Quote("amount") + ") VALUES (" +
		s.D.Placeholder(1) + ", " + s.D.Placeholder(2) + ")"
	handle := func(ctx context.Context, m *core.Message[Payment]) error {
		if m.Payload.Amount <= 0 {
			return core.Drop()
		}
		tx, err := inbox.Tx(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, m.Payload.ID, m.Payload.Amount); err != nil {
			return fmt.Errorf("booking payment %s: %w", m.Payload.ID, err)
		}
		// The receipt commits with the booking and the inbox record; the relay sends it after.
		_, err = s.Outbox.RecordJSON(ctx, tx, ReceiptsDestination, Receipt{Payment: m.Payload.ID, Amount: m.Payload.Amount}, nil)
		return err
	}
	// The receipts go out at once after an acknowledgement rather than at the next sweep.
	kick := core.OnSettled(func(st core.Settlement) {
		if st.Err == nil && st.Verdict.Action == core.ActAck {
			s.Outbox.Kick()
		}
	})
	return core.Subscribe(app, ep, handle, append(opts, s.Inbox.Receive(), kick)...)
}

// Booked returns how many ledger rows each payment has.
func (s *Service) Booked(ctx context.Context) (map[string]int, error) {
	rows, err := s.DB.Query(ctx, "SELECT "+s.D.Quote("payment")+", COUNT(*) FROM "+s.D.Quote(s.Ledger)+" GROUP BY "+s.D.Quote("payment"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, rows.Err()
}
