package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

var _ driver.ClaimIndex = (*dialect)(nil)

// indexesSQL lists a table's indexes and their columns in order; an empty schema means the
// connection's current database.
const indexesSQL = `SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?
ORDER BY INDEX_NAME, SEQ_IN_INDEX`

// ClaimIndexHint pins the index every claim of t reads its rows through. InnoDB locks the
// secondary-index entry of each row a locking read reaches through that index, and a SELECT …
// FOR UPDATE SKIP LOCKED that then skips the row (another transaction holds it) keeps the lock
// on the entry. Where one claim holds a row by its primary key alone (the row-lock form locks
// the rows it counted again by id) and another claim's scan passed over it through the ready
// index, the first claim's settlement (which deletes the row or changes processed_at or the
// group, all in that index) waits for the second claim to end; and a row-lock claim ends only
// when its own handlers are done, which may be waiting for workers that are stuck in such
// settlements (measured on MariaDB 10.11: settlements stalled 30 s, until the statement
// timeout cut them, in one run in three of two competing processes). When every claim reaches
// its rows through the same index, a claim that meets an entry another claim holds skips it
// without locking anything.
//
// The index chosen is the first, by name, whose leading columns are leading in any order (the
// DDL's table_ready index: group, processed_at, id); the primary key when leading is empty or
// no index starts with them, in which case a warning says which index to create.
func (d *dialect) ClaimIndexHint(ctx context.Context, q sqlqueue.Queryer, t sqlqueue.TableRef, leading []string) (string, error) {
	const primary = " FORCE INDEX (PRIMARY)"
	if len(leading) == 0 {
		return primary, nil
	}
	rows, err := q.Query(ctx, indexesSQL, t.Schema, t.Name)
	if err != nil {
		return "", fmt.Errorf("mysql: reading the indexes of %s from information_schema: %w", t, err)
	}
	defer rows.Close()
	var names []string
	cols := map[string][]string{}
	for rows.Next() {
		var name, col string
		if err := rows.Scan(&name, &col); err != nil {
			return "", fmt.Errorf("mysql: reading the indexes of %s: %w", t, err)
		}
		if _, seen := cols[name]; !seen {
			names = append(names, name)
		}
		cols[name] = append(cols[name], col)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("mysql: reading the indexes of %s: %w", t, err)
	}
	for _, name := range names {
		if name != "PRIMARY" && startsWith(cols[name], leading) {
			return " FORCE INDEX (" + quote(name) + ")", nil
		}
	}
	d.log.Warn("mysql: no index of the queue table starts with the columns every claim compares; claims read the table by its primary key, through every processed row",
		"table", t.String(), "columns", strings.Join(leading, ", "),
		"create", "KEY "+t.Name+"_ready ("+strings.Join(leading, ", ")+", <id column>)")
	return primary, nil
}

// startsWith reports whether the first len(leading) of cols are leading, in any order, compared
// without case as MySQL compares column names.
func startsWith(cols, leading []string) bool {
	if len(cols) < len(leading) {
		return false
	}
	for _, want := range leading {
		if !slices.ContainsFunc(cols[:len(leading)], func(c string) bool { return strings.EqualFold(c, want) }) {
			return false
		}
	}
	return true
}
