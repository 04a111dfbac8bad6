package postgres

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestGolden: the SQL the engine renders for PostgreSQL, every form over every table shape, is
// the one in testdata/golden (go test -run TestGolden -update rewrites it). The catalogue's
// answers are those of a table made by CreateTable: its ready index starts with (group, id).
func TestGolden(t *testing.T) {
	sqlqueuetest.Golden(t, "testdata/golden", newDialect(defaultKeyFunc), sqlqueuetest.Catalogue{GroupOrder: true, Schema: "public"})
}
