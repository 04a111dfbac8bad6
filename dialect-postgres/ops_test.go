package postgres_test

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestOps runs the operations suite (stats, list, show, redrive with the one-statement move,
// purge) on the real PostgreSQL, a schema per test, reading back with pgx.
func TestOps(t *testing.T) {
	sqlqueuetest.RunOps(t, fixture)
}
