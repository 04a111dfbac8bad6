package sqlqueue

import (
	"testing"

	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// namedPostgres calls itself "postgres" and declares nothing: a name is not a family.
type namedPostgres struct{ pgLike }

func (namedPostgres) Name() string { return "postgres" }

// mysqlFamily declares MySQL's family under a name settle does not know.
type mysqlFamily struct{ pgLike }

func (mysqlFamily) Name() string   { return "my-own-mysql" }
func (mysqlFamily) Family() Family { return FamilyMySQL }

// TestFamilyIsDeclaredNeverNamed: what custom events, plugins and telemetry are told about a
// dialect's SQL comes from SQLFamily alone; a dialect named like one of settle's own but
// declaring nothing is not taken for it, and one with any name that declares a family is
// treated as that family's.
func TestFamilyIsDeclaredNeverNamed(t *testing.T) {
	for _, c := range []struct {
		d      Dialect
		family Family
		system string
	}{
		{namedPostgres{}, "", "unknown"},
		{pgLike{}, "", "unknown"},
		{mysqlFamily{}, FamilyMySQL, "mysql"},
	} {
		if f := FamilyOf(c.d); f != c.family {
			t.Errorf("FamilyOf(%s) = %q, want %q", c.d.Name(), f, c.family)
		}
		if s := engine.SystemName(FamilyOf(c.d)); s != c.system {
			t.Errorf("messaging.system of %s = %q, want %q", c.d.Name(), s, c.system)
		}
	}
}
