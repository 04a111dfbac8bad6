package sqlite

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestOps runs the operations suite (stats, list, show, redrive, purge) on SQLite files, both
// table shapes, reading back with database/sql.
func TestOps(t *testing.T) {
	sqlqueuetest.RunOps(t, openFixture)
}
