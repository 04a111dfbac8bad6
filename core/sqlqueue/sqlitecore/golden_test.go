package sqlitecore_test

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/sqlitecore"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestGolden: the SQL the engine renders for SQLite, for both SQLite modules, the lease and
// advisory forms over every table shape, is the one in testdata/golden (go test -run TestGolden
// -update rewrites it).
func TestGolden(t *testing.T) {
	sqlqueuetest.Golden(t, "testdata/golden", sqlitecore.NewDialect("sqlite", "sqlite", nil), sqlqueuetest.Catalogue{Schema: "main"})
}
