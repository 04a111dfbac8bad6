package periodic

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
)

// family is a dialect that declares its SQL family and column types and nothing else.
type family struct{ f sqlqueue.Family }

func (family) Name() string              { return "test" }
func (family) Quote(s string) string     { return `"` + s + `"` }
func (family) Placeholder(n int) string  { return "$" + string(rune('0'+n)) }
func (family) Time(t time.Time) any      { return t }
func (family) Returning() bool           { return true }
func (family) MaxIdentifier() int        { return 12 }
func (f family) Family() sqlqueue.Family { return f.f }
func (family) DDLTypes() sqlqueue.Types {
	return sqlqueue.Types{Text: "TXT", Time: "TS", TableOptions: " OPTS"}
}
func (family) Columns(context.Context, sqlqueue.Queryer, sqlqueue.TableRef) ([]sqlqueue.ColumnInfo, error) {
	return nil, nil
}

type plain struct{}

func (plain) Name() string           { return "duck" }
func (plain) Quote(s string) string  { return s }
func (plain) Placeholder(int) string { return "?" }
func (plain) Time(t time.Time) any   { return t }
func (plain) Returning() bool        { return false }
func (plain) Columns(context.Context, sqlqueue.Queryer, sqlqueue.TableRef) ([]sqlqueue.ColumnInfo, error) {
	return nil, nil
}

// TestDDL: the tick table from the types a dialect declares; a dialect without them is told
// what to create, a name past its limit is refused.
func TestDDL(t *testing.T) {
	ddl, err := DDL(family{sqlqueue.FamilyPostgres}, "app.ticks")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS \"app\".\"ticks\" (\n  \"schedule\" TXT NOT NULL,\n  \"tick\" TXT NOT NULL,\n" +
		"  \"claimed_at\" TS NOT NULL,\n  PRIMARY KEY (\"schedule\", \"tick\")\n) OPTS"
	if ddl != want {
		t.Errorf("DDL:\n%s\nwant\n%s", ddl, want)
	}
	if _, err := DDL(plain{}, "ticks"); err == nil || !strings.Contains(err.Error(), "DDLTypes") {
		t.Errorf("DDL without declared types: %v", err)
	}
	if _, err := DDL(family{}, "a_long_tick_table"); err == nil || !strings.Contains(err.Error(), "at most 12") {
		t.Errorf("DDL past the identifier limit: %v", err)
	}
}

// TestSQLClaimsSpelling: an insert that does nothing on a duplicate, per family; a dialect of no
// known family is refused, naming what the claims need.
func TestSQLClaimsSpelling(t *testing.T) {
	for f, want := range map[sqlqueue.Family]string{
		sqlqueue.FamilyPostgres: `INSERT INTO "ticks" ("schedule", "tick", "claimed_at") VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		sqlqueue.FamilySQLite:   `INSERT INTO "ticks" ("schedule", "tick", "claimed_at") VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		sqlqueue.FamilyMySQL:    `INSERT IGNORE INTO "ticks" ("schedule", "tick", "claimed_at") VALUES ($1, $2, $3)`,
		sqlqueue.FamilyMariaDB:  `INSERT IGNORE INTO "ticks" ("schedule", "tick", "claimed_at") VALUES ($1, $2, $3)`,
	} {
		c, err := NewSQLClaims(family{f}, nilDB{}, "ticks", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.insert != want {
			t.Errorf("%s: %s, want %s", f, c.insert, want)
		}
	}
	if _, err := NewSQLClaims(plain{}, nilDB{}, "ticks", nil); err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("a dialect of no family: %v", err)
	}
	if _, err := NewSQLClaims(family{sqlqueue.FamilySQLite}, nilDB{}, "bad name", nil); err == nil || !strings.Contains(err.Error(), "bad name") {
		t.Errorf("a malformed table name: %v", err)
	}
}

// nilDB is a database the spelling tests never reach.
type nilDB struct{ sqlqueue.DB }
