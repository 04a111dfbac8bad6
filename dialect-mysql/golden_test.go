package mysql

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlqueuetest"
)

// TestGolden: the SQL the engine renders for MySQL 8 and MariaDB, every form over every table
// shape, is the one in testdata/golden/<flavour> (go test -run TestGolden -update rewrites it).
// The catalogue's answers are those of a table made by CreateTable: the claims read its ready
// index (group, processed_at, id) where it has one, the primary key otherwise.
func TestGolden(t *testing.T) {
	hint := func(tb sqlqueue.Table) string {
		if tb.Columns.Group == "" && tb.Columns.ProcessedAt == "" {
			return " FORCE INDEX (PRIMARY)"
		}
		return " FORCE INDEX (" + quote(tb.Name+"_ready") + ")"
	}
	for _, v := range []Version{{Flavour: MySQL, Major: 8, Minor: 0, Patch: 36}, {Flavour: MariaDB, Major: 10, Minor: 11, Patch: 6}} {
		t.Run(v.Flavour.String(), func(t *testing.T) {
			sqlqueuetest.Golden(t, "testdata/golden/"+v.Flavour.String(), newDialect(v, nil), sqlqueuetest.Catalogue{ClaimHint: hint, Schema: "test"})
		})
	}
}
