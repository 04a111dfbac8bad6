package engine

import (
	"fmt"
	"strings"

	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// Queue is one queue: a table, or a group of a table with a group column, spelled by a dialect
// and reached through a DB. Endpoints, publishers and operations views are made over one.
type Queue struct {
	D      driver.Dialect
	DB     driver.DB
	Schema *driver.Schema
	Group  string
	// Name names the queue: its group, or the table.
	Name string
}

// NewQueue validates the table t and the queue's group; what names the caller in errors ("lease
// queue", "publisher").
func NewQueue(what string, d driver.Dialect, db driver.DB, t driver.Table, group string) (*Queue, error) {
	if d == nil || db == nil {
		return nil, fmt.Errorf("sqlqueue: %s on table %s: nil dialect or database", what, t.Ref())
	}
	s, err := driver.NewSchema(d, t)
	if err != nil {
		return nil, err
	}
	q := &Queue{D: d, DB: db, Schema: s, Group: group, Name: t.Ref().String()}
	switch {
	case s.Group != "" && strings.TrimSpace(group) == "":
		return nil, fmt.Errorf("sqlqueue: table %s has a group column (%s): name the queue's group", t.Ref(), t.Columns.Group)
	case s.Group == "" && group != "":
		return nil, fmt.Errorf("sqlqueue: table %s has no group column, so it cannot hold group %q (name Columns.Group, or pass \"\")", t.Ref(), group)
	case s.Group != "":
		q.Name = group
	}
	return q, nil
}

// Ref names the queue for wake-ups and notifications.
func (q *Queue) Ref() driver.QueueRef {
	return driver.QueueRef{Table: q.Schema.Table.Ref(), Group: q.Group}
}
