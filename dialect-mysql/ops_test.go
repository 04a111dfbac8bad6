package mysql

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestOps runs the operations suite (stats, list, show, redrive as copy and delete in one
// transaction, purge) on MariaDB, and on MySQL 8 when SETTLE_TEST_MYSQL_URL names one, reading
// back with database/sql.
func TestOps(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		sqlqueuetest.RunOps(t, fixture(s, 0))
	})
}
