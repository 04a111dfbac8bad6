package sqlitepure

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/sqlitecore"
)

// TableDDL returns the DDL of a queue table described by t: the columns it names, with SQLite
// types, and an index for the claim (sqlitecore.TableDDL, which both SQLite modules share). For a
// table whose dead letter is a table, create the dead-letter table with the same description
// under its own name.
func TableDDL(t sqlqueue.Table) (string, error) { return sqlitecore.TableDDL(t) }

// CreateTable creates the queue table t (see TableDDL) if it does not exist.
func (db *DB) CreateTable(ctx context.Context, t sqlqueue.Table) error {
	ddl, err := TableDDL(t)
	if err != nil {
		return err
	}
	if _, err := db.pool.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("sqlitepure: create table %s: %w", t.Ref(), err)
	}
	return nil
}
