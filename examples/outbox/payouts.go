// Command outbox is a payouts service built on settle's transactional outbox: placing an order
// writes the order and an outgoing payout message in one database transaction; the relay
// publishes the payout once the transaction has committed; the payouts handler writes the
// ledger entry in its delivery's transaction, and the outbox mark commits with it, so a payout
// is booked once even when its message is delivered twice.
//
//	go run ./examples/outbox            # on SQLite, nothing to install
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/outbox"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-sqlite"
)

// Payout is the outgoing message an order records.
type Payout struct {
	Order string `json:"order"`
	Cents int64  `json:"cents"`
}

// Names of the service's tables and queue.
const (
	OutboxTable = "outbox"
	QueueTable  = "payouts_queue"
	PayoutQueue = "payouts"
)

// Schema creates the service's tables: orders, ledger, the outbox and the payouts queue.
func Schema(ctx context.Context, db *sqlite.DB) error {
	ddl, err := outbox.DDL(db.Dialect(), OutboxTable)
	if err != nil {
		return err
	}
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, cents INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, cents INTEGER NOT NULL)`,
		ddl,
	} {
		if _, err := db.Pool().ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	return db.CreateTable(ctx, sqlqueue.StandardTable(QueueTable))
}

// QueuePublisher relays outbox records into the SQLite queue table, one group per destination:
// the outbox works with any settle transport.
type QueuePublisher struct {
	db   *sqlite.DB
	pubs map[string]*sqlqueue.Publisher
}

// NewQueuePublisher returns a publisher into the queue table's groups named dests.
func NewQueuePublisher(db *sqlite.DB, dests ...string) (*QueuePublisher, error) {
	p := &QueuePublisher{db: db, pubs: make(map[string]*sqlqueue.Publisher)}
	for _, d := range dests {
		pub, err := sqlite.NewPublisher(db, sqlqueue.StandardTable(QueueTable), d, sqlqueue.PublishCodec(core.Raw))
		if err != nil {
			return nil, err
		}
		p.pubs[d] = pub
	}
	return p, nil
}

// Publish inserts one message into the destination's group; the insert's commit is its confirm.
func (p *QueuePublisher) Publish(ctx context.Context, dest string, payload []byte, headers map[string]string) error {
	pub, ok := p.pubs[dest]
	if !ok {
		return fmt.Errorf("no queue for destination %q", dest)
	}
	_, err := pub.PublishRaw(ctx, payload, sqlqueue.WithHeaders(headers))
	return err
}

// PlaceOrder writes the order and records its payout in one transaction, then sends the
// payout. If the process dies between commit and send, the next start publishes it.
func PlaceOrder(ctx context.Context, db *sqlite.DB, box *outbox.Outbox, id string, cents int64) error {
	tx, err := db.Pool().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, cents) VALUES (?, ?)`, id, cents); err != nil {
		return fmt.Errorf("order %s: %w", id, err)
	}
	batch, err := box.RecordJSON(ctx, sqlqueue.StdTx(tx), PayoutQueue, Payout{Order: id, Cents: cents}, nil)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return box.Send(ctx, batch)
}

// ErrBankDown is the fake bank's refusal for orders whose id starts with "down" (once), and
// ErrVoided its answer for orders whose id starts with "void" (the payout is dropped).
var (
	ErrBankDown = errors.New("bank unavailable")
	ErrVoided   = errors.New("order voided")
)

// HandlePayout books the payout in the ledger inside the delivery's transaction; the outbox
// receiver marks the record in the same transaction.
func HandlePayout(ctx context.Context, m *core.Message[Payout]) error {
	if strings.HasPrefix(m.Payload.Order, "down") && m.Attempt() == 1 {
		return core.Retry().Because(ErrBankDown)
	}
	if strings.HasPrefix(m.Payload.Order, "void") {
		return core.Drop().Because(ErrVoided)
	}
	tx, err := sqlite.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO ledger (order_id, cents) VALUES (?, ?)`, m.Payload.Order, m.Payload.Cents)
	return err
}

// Ledger returns how many ledger entries each order has.
func Ledger(ctx context.Context, db *sql.DB) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT order_id, COUNT(*) FROM ledger GROUP BY order_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
