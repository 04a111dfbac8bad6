package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/sqlqueue"
)

// checkIDs refuses, before anything is opened, a dead-letter id that is not a number where ids
// are numbers (SQL row ids, JetStream sequences): a usage error (exit 2), not an unknown id
// (exit 5).
func checkIDs(kind string, ids []string) error {
	what := map[string]string{"sqlite": "a row id", "postgres": "a row id", "mysql": "a row id",
		"nats": "a sequence of the dead-letter stream"}[kind]
	if what == "" {
		return nil
	}
	for _, id := range ids {
		if _, err := strconv.ParseInt(id, 10, 64); err != nil {
			return usageErr("dead-letter id %q is not a number: on %s an id is %s", id, kind, what)
		}
	}
	return nil
}

// sqlOps is the ops.Queue of a SQL queue table, with what the hints need: on a table with a
// group column the queue and its dead letter are groups, and a group nobody wrote to reads as
// an empty queue.
type sqlOps struct {
	ops.Queue
	db          sqlqueue.DB
	table       string // as the user named it
	hasRow      string // SELECT 1 … WHERE group = ? LIMIT 1, or "" without a group column
	queue, dead string
}

func newSQLOps(q *sqlqueue.Ops, d sqlqueue.Dialect, db sqlqueue.DB, tb sqlqueue.Table, ref sqlqueue.TableRef, queue, dead string) (*sqlOps, error) {
	o := &sqlOps{Queue: q, db: db, table: ref.String(), queue: queue, dead: dead}
	if tb.Columns.Group == "" {
		return o, nil
	}
	s, err := sqlqueue.NewSchema(d, tb)
	if err != nil {
		return nil, err
	}
	o.hasRow = "SELECT 1 FROM " + s.QTable + " WHERE " + s.Group + " = " + d.Placeholder(1) + " LIMIT 1"
	return o, nil
}

// groupHint says on w that group names no row at all, where the table has a group column: an
// idle queue and a typo both show zeros, and only the table can tell them apart a little. It
// says nothing when the check itself fails: the figures printed stand on their own.
func groupHint(ctx context.Context, q ops.Queue, w io.Writer, group string) {
	s, ok := q.(*sqlOps)
	if !ok || s.hasRow == "" || group == "" {
		return
	}
	rows, err := s.db.Query(ctx, s.hasRow, group)
	if err != nil {
		return
	}
	found := rows.Next()
	if rows.Close() != nil || rows.Err() != nil {
		return
	}
	if !found {
		fmt.Fprintf(w, "settle: no row has group %q in table %s (a typo, or an idle queue)\n", group, s.table)
	}
}

// statsHints hints at the queue's and the dead letter's groups when their figures are zeros.
func statsHints(ctx context.Context, q ops.Queue, w io.Writer, st ops.Stats) {
	s, ok := q.(*sqlOps)
	if !ok {
		return
	}
	if st.Ready == 0 && st.Delayed == 0 && st.InFlight == 0 {
		groupHint(ctx, q, w, s.queue)
	}
	if st.Dead == 0 && st.Measured(ops.FigureDead) {
		groupHint(ctx, q, w, s.dead)
	}
}

// deadHint hints at the dead letter's group when a listing, redrive or purge found nothing.
func deadHint(ctx context.Context, q ops.Queue, w io.Writer) {
	if s, ok := q.(*sqlOps); ok {
		groupHint(ctx, q, w, s.dead)
	}
}
