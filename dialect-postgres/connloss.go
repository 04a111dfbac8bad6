package postgres

import (
	"errors"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// A lost or refused connection is told from other errors (driver.ConnLoss), so that a
// subscription claims again as soon as a restarted server answers instead of backing off.
var _ driver.ConnLoss = (*dialect)(nil)

// ConnLost reports whether err wraps ErrConnLost: the connection was closed under a statement,
// or the server refused it or could not be reached.
func (*dialect) ConnLost(err error) bool { return errors.Is(err, ErrConnLost) }
