package mysql

import (
	"strings"
	"sync"

	"github.com/settlehq/settle/core/sqlqueue"
)

// rewriter adjusts, at the module edge, the engine statements whose MySQL spelling needs more
// than the dialect interface lets a dialect say. It touches only statements on queue tables this
// DB's endpoints were built for, in the exact shapes the engine renders them: DELETE and UPDATE
// statements that name their rows with an IN list (grouped lease settlement) get FORCE INDEX
// (PRIMARY). InnoDB's statistics of a queue table are nearly always stale (it fills and drains
// faster than they are recalculated), and with a small row estimate the optimizer scans the
// whole table; a scanning DELETE locks every row it reads and waits on rows other claimants
// hold, which turns concurrent settlements into lock waits and deadlocks (measured on MariaDB
// 10.11: the first grouped settlements after a bulk insert deadlock). By the primary key, each
// statement locks exactly its own rows. (The advisory candidates' IS_USED_LOCK filter is the
// dialect's KeyFree.)
//
// Rewritten statements are kept (there are a few per table: one per IN-list length); other
// statements pass through unchanged and are not kept, so a handler's own SQL through the
// delivery's transaction costs a few prefix comparisons.
type rewriter struct {
	mu     sync.RWMutex
	tables []queueTable
	done   map[string]string
}

type queueTable struct {
	qtable string
}

// register makes the statements on table t eligible for rewriting.
func (r *rewriter) register(db *DB, t sqlqueue.Table) {
	s, err := sqlqueue.NewSchema(db.dialect, t)
	if err != nil {
		return // the engine refuses the table with this error itself
	}
	qt := queueTable{qtable: s.QTable}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.tables {
		if x == qt {
			return
		}
	}
	r.tables = append(r.tables, qt)
}

// sql returns the statement to send for q.
func (r *rewriter) sql(q string) string {
	r.mu.RLock()
	if out, ok := r.done[q]; ok {
		r.mu.RUnlock()
		return out
	}
	tables := r.tables
	r.mu.RUnlock()
	for _, t := range tables {
		if out, ok := t.rewrite(q); ok {
			r.mu.Lock()
			if r.done == nil {
				r.done = map[string]string{}
			}
			r.done[q] = out
			r.mu.Unlock()
			return out
		}
	}
	return q
}

func (t queueTable) rewrite(q string) (string, bool) {
	switch {
	case strings.HasPrefix(q, "DELETE FROM "+t.qtable+" WHERE ") && strings.Contains(q, " IN ("):
		return "DELETE " + t.qtable + " FROM " + t.qtable + " FORCE INDEX (PRIMARY)" + q[len("DELETE FROM ")+len(t.qtable):], true
	case strings.HasPrefix(q, "UPDATE "+t.qtable+" SET ") && strings.Contains(q, " IN ("):
		return "UPDATE " + t.qtable + " FORCE INDEX (PRIMARY)" + q[len("UPDATE ")+len(t.qtable):], true
	}
	return q, false
}
