package sqlitecore

import (
	"strings"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// nowDefault is the current time in TimeFormat, for created_at's default: SQLite's clock has
// millisecond resolution, and %f gives seconds with three decimals, so three zeros make the
// microseconds and keep the text fixed-width (and ordered as the times are).
const nowDefault = "strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'"

// TableDDL returns the DDL of a queue table described by t: the columns it names, with
// SQLite types, and an index for the claim. For a table whose dead letter is a table, create
// the dead-letter table with the same description under its own name.
//
// Both SQLite modules use one file alike. For sqlqueue.StandardTable("refunds") it is:
//
//	CREATE TABLE IF NOT EXISTS "refunds" (
//	  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
//	  "payload" BLOB NOT NULL,
//	  "grp" TEXT NOT NULL,
//	  "attempt" INTEGER NOT NULL DEFAULT 0,
//	  "retry_after" TEXT,
//	  "locked_until" TEXT,
//	  "processed_at" TEXT,
//	  "headers" TEXT,
//	  "created_at" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')
//	);
//	CREATE INDEX IF NOT EXISTS "refunds_ready" ON "refunds" ("grp", "id") WHERE "processed_at" IS NULL;
func TableDDL(t driver.Table) (string, error) {
	d := NewDialect("sqlite", "sqlite", nil)
	s, err := driver.NewSchema(d, t)
	if err != nil {
		return "", err
	}
	cols := s.ColumnDefs(driver.ColumnTypes{
		ID: "INTEGER PRIMARY KEY AUTOINCREMENT", Payload: "BLOB NOT NULL", Group: "TEXT NOT NULL",
		Attempt: "INTEGER NOT NULL DEFAULT 0", RetryAfter: "TEXT", LockedUntil: "TEXT", ProcessedAt: "TEXT",
		Headers: "TEXT", CreatedAt: "TEXT NOT NULL DEFAULT (" + nowDefault + ")",
	})
	for i, c := range cols {
		cols[i] = "  " + c
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + s.QTable + " (\n" + strings.Join(cols, ",\n") + "\n);"
	var idx []string
	if s.Group != "" {
		idx = append(idx, s.Group)
	}
	idx = append(idx, s.ID)
	if len(idx) > 1 || s.ProcessedAt != "" {
		name := t.Name + "_ready"
		if t.Schema != "" {
			name = d.Quote(t.Schema) + "." + d.Quote(name)
		} else {
			name = d.Quote(name)
		}
		ddl += "\nCREATE INDEX IF NOT EXISTS " + name + " ON " + d.Quote(t.Name) + " (" + strings.Join(idx, ", ") + ")"
		if s.ProcessedAt != "" {
			ddl += " WHERE " + s.ProcessedAt + " IS NULL"
		}
		ddl += ";"
	}
	return ddl, nil
}
