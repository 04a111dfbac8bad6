package lease

import (
	"context"
	"sync"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// delivery is one leased row. Its token changes only while the extender holds its mutex, and
// never once Finish has marked it finishing: a queued settlement always fences with the token in
// the row.
type delivery struct {
	engine.Delivery

	mu       sync.Mutex // guards token against the extender
	token    time.Time  // locked_until as stamped
	handedAt time.Time  // with a handler Timeout: when it was handed out

	lost      bool // an extension found the row taken
	finishing bool // Finish was called; the extender leaves it alone
	overran   bool // its handler ran past Timeout and grace; no longer extended
	settled   bool
	uncharged bool // rescued, its attempt not yet counted (Charge counts it as its handler starts)

	b *batch // the claim it came in
}

var (
	_ core.DeliveryContext = (*delivery)(nil)
	_ core.Charger         = (*delivery)(nil)
)

// newDeliveries makes the deliveries of one claim in one slab, their ids in decimal in one
// string, each stamped with the claim's token.
func newDeliveries(rt *engine.Runtime, rows []driver.Claimed, token time.Time, b *batch) []delivery {
	ds := make([]delivery, len(rows))
	var endBuf [engine.DefaultMaxBatch]int32 // an automatic claim's ends stay on the stack
	ids, ends := engine.IDText(rows, endBuf[:0])
	at := int32(0)
	for i, r := range rows {
		ds[i].Init(rt, r, ids[at:ends[i]])
		ds[i].token, ds[i].b = token, b
		at = ends[i]
	}
	return ds
}

// HandlerContext puts the delivery into the handler's context in transactional mode.
func (d *delivery) HandlerContext(ctx context.Context) context.Context { return d.WithTx(ctx, d) }

// BeginHandlerTx begins the handler's transaction: one of its own, which an ack commits with
// the settlement.
func (d *delivery) BeginHandlerTx(ctx context.Context) (driver.Transaction, error) {
	return d.Runtime().DB.Begin(ctx)
}

// Charge counts the attempt of a rescued row as its handler starts (core.Charger): a committed
// UPDATE fenced by its lease. Its rescue claim took the attempt back (claimer.go's doClaim), so
// a process that dies between the rescue and the handler — the rescued row waits for the
// subscription's other handlers to finish, since it runs alone — charges it nothing.
// ErrLeaseLost when another claim holds the row by now. Other deliveries count nothing here.
func (d *delivery) Charge(ctx context.Context) error {
	if !d.uncharged {
		return nil
	}
	rt := d.Runtime()
	ctx, cancel := context.WithTimeout(ctx, rt.Cfg.StmtTimeout)
	defer cancel()
	// The extender skips a delivery whose mutex is held: the token cannot change meanwhile.
	d.mu.Lock()
	defer d.mu.Unlock()
	r, err := rt.DB.Exec(ctx, d.b.src.st.charge, d.RowID(), rt.D.Time(d.token))
	switch {
	case err != nil:
		return err
	case r.RowsAffected == 0:
		return ErrLeaseLost
	}
	d.uncharged = false
	return nil
}
