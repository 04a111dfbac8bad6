package outbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// plainDialect declares nothing beyond sqlqueue.Dialect; its name is no name settle knows.
type plainDialect struct{}

func (plainDialect) Name() string           { return "duck" }
func (plainDialect) Quote(s string) string  { return `"` + s + `"` }
func (plainDialect) Placeholder(int) string { return "?" }
func (plainDialect) Time(t time.Time) any   { return t }
func (plainDialect) Returning() bool        { return true }
func (plainDialect) MaxIdentifier() int     { return 10 }
func (plainDialect) Columns(context.Context, sqlqueue.Queryer, sqlqueue.TableRef) ([]driver.ColumnInfo, error) {
	return nil, nil
}

// typed declares its column types, under a name settle does not know either.
type typed struct{ plainDialect }

func (typed) DDLTypes() driver.Types {
	return driver.Types{ID: "ID", Integer: "INT", Text: "TXT", Bytes: "BIN", JSON: "DOC", Time: "TS", TableOptions: " OPTS"}
}

// TestDDLFromDeclaredTypes: DDL follows the types a dialect declares, never its name; a dialect
// that declares none is told what to create.
func TestDDLFromDeclaredTypes(t *testing.T) {
	ddl, err := DDL(typed{}, "box")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS \"box\" (\n  \"id\" ID,\n  \"destination\" TXT NOT NULL,\n  \"payload\" BIN NOT NULL,\n" +
		"  \"headers\" DOC,\n  \"created_at\" TS NOT NULL,\n  \"published_at\" TS,\n  \"processed_at\" TS\n) OPTS"
	if ddl != want {
		t.Errorf("DDL:\n%s\nwant\n%s", ddl, want)
	}
	if _, err := DDL(plainDialect{}, "box"); err == nil || !strings.Contains(err.Error(), "DDLTypes") || !strings.Contains(err.Error(), "destination") {
		t.Errorf("DDL without declared types: %v", err)
	}
	if _, err := DDL(typed{}, "a_long_outbox"); err == nil || !strings.Contains(err.Error(), "at most 10") {
		t.Errorf("DDL past the dialect's identifier limit: %v", err)
	}
}
