package rowlock

import (
	"context"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// delivery is one row a claim holds locked in its transaction.
type delivery struct {
	engine.Delivery
	b       *batch // its claim
	counted bool   // its claim counted its attempt
}

var _ core.DeliveryContext = (*delivery)(nil)

// newDeliveries makes the deliveries of one claim in one slab, their ids in decimal in one
// string.
func newDeliveries(rt *engine.Runtime, rows []driver.Claimed, b *batch, counted, suspect bool) []delivery {
	ds := make([]delivery, len(rows))
	var endBuf [engine.DefaultMaxBatch]int32 // an automatic claim's ends stay on the stack
	ids, ends := engine.IDText(rows, endBuf[:0])
	at := int32(0)
	for i, r := range rows {
		ds[i].Init(rt, r, ids[at:ends[i]])
		ds[i].b, ds[i].counted = b, counted
		ds[i].SetSuspect(suspect)
		at = ends[i]
	}
	return ds
}

// HandlerContext puts the delivery into the handler's context in transactional mode.
func (d *delivery) HandlerContext(ctx context.Context) context.Context { return d.WithTx(ctx, d) }

// BeginHandlerTx gives the handler its claim's transaction, behind a savepoint that every
// outcome but an ack rolls back to.
func (d *delivery) BeginHandlerTx(ctx context.Context) (driver.Transaction, error) {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.tx.Exec(ctx, "SAVEPOINT settle_delivery"); err != nil {
		return b.tx, err
	}
	return b.tx, nil
}
