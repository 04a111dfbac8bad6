package postgres

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

var _ driver.GroupOrder = (*dialect)(nil)

// groupIndexSQL looks for a valid btree index of table $1 whose first two keys are the
// columns $2 (group) and $3 (id), ascending, with the default operator class and the column's
// collation for the group (so that the claims' comparisons of the group can use it), and with
// no predicate or the DDL's "$4 IS NULL" ($4 the processed_at column, "" without one).
const groupIndexSQL = `SELECT EXISTS (SELECT 1 FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
JOIN pg_attribute g ON g.attrelid = i.indrelid AND g.attname = $2 AND NOT g.attisdropped
JOIN pg_attribute d ON d.attrelid = i.indrelid AND d.attname = $3 AND NOT d.attisdropped
JOIN pg_opclass oc ON oc.oid = i.indclass[0] AND oc.opcdefault
WHERE i.indrelid = to_regclass($1) AND i.indisvalid AND i.indnkeyatts >= 2
AND i.indkey[0] = g.attnum AND i.indkey[1] = d.attnum
AND i.indoption[0] = 0 AND i.indoption[1] = 0
AND i.indcollation[0] = g.attcollation
AND (i.indpred IS NULL OR ($4 <> '' AND pg_get_expr(i.indpred, i.indrelid) = '(' || quote_ident($4) || ' IS NULL)')))`

// GroupOrdered reports whether t has an index every claim can read its ready rows through in
// (group, id) order: the DDL's <table>_ready, (group, id) WHERE processed_at IS NULL (without
// processed_at, (group, id)), or another that starts with the same keys. The engine then shapes
// the claims so that the planner reads that index (driver.GroupOrder): compared by equality
// on the group and ordered by id, a claim is planned on the primary key as soon as the
// statistics say most rows are ready (taken before the rows were processed) or the dead letters
// of the table are few and spread out, and it then reads every processed row and dead letter in
// front of the ready ones (issue 21: 66,837 pages a claim behind 100,000 processed rows). A
// table without such an index keeps the claims in id order, which the primary key gives; the
// DB's logger says which index to create.
func (d *dialect) GroupOrdered(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.Table) (bool, error) {
	c := t.Columns
	rows, err := q.Query(ctx, groupIndexSQL, quoteRef(t.Ref()), c.Group, c.ID, c.ProcessedAt)
	if err != nil {
		return false, fmt.Errorf("postgres: reading the indexes of %s: %w", t.Ref(), err)
	}
	defer rows.Close()
	var found bool
	if rows.Next() {
		if err := rows.Scan(&found); err != nil {
			return false, fmt.Errorf("postgres: reading the indexes of %s: %w", t.Ref(), err)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("postgres: reading the indexes of %s: %w", t.Ref(), err)
	}
	if !found && d.log != nil {
		create := ""
		if s, err := driver.NewSchema(d, t); err == nil {
			create = readyIndex(t, s)
		}
		d.log.Warn("postgres: no index of the queue table starts with its group and id columns; claims read the table in id order by its primary key, through every processed row and dead letter in front of the ready ones",
			"table", t.Ref().String(), "create", create)
	}
	return found, rows.Close()
}
