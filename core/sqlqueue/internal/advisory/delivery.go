package advisory

import (
	"context"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// delivery is one row whose key a dedicated connection holds.
type delivery struct {
	engine.Delivery
	ac  *conn
	key string
}

var _ core.DeliveryContext = (*delivery)(nil)

// HandlerContext puts the delivery into the handler's context in transactional mode.
func (d *delivery) HandlerContext(ctx context.Context) context.Context { return d.WithTx(ctx, d) }

// BeginHandlerTx begins the handler's transaction on the connection holding the row's key.
func (d *delivery) BeginHandlerTx(ctx context.Context) (driver.Transaction, error) {
	return d.ac.c.Begin(ctx)
}
